package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

var (
	placeholderRE = regexp.MustCompile(`'@@(replicas|resources)\.(\w+)@@'`)
	resourcesRE   = regexp.MustCompile(`(?m)^( *)resources: '@@resources\.(\w+)@@'$`)
	itemRE        = regexp.MustCompile(`(?m)^( *)- '@@item\.(\d+)@@'$`)
	peersRE       = regexp.MustCompile(`(?m)^( *)- from: '@@codec\.from@@'$`)
	ipAddressesRE = regexp.MustCompile(`(?m)^( *)ipAddresses: '@@ipAddresses\.(\w+)@@'$`)
)

// template is o as a template: the image, the Temporal address and TLS
// Secret, and a Deployment's replicas and resources come from the values;
// the operator's codec server items are gated by codec.enabled, its
// --codec-allowed-origins and the worker's --exec-gate-url come from values,
// and so do the codec NetworkPolicy's peers.
func template(o install.Object) ([]byte, error) {
	// items are list items replaced by a placeholder, by its number: each
	// becomes the template its function writes at the item's indentation.
	var items []func(indent string) string
	o, err := withPlaceholders(o, &items)
	if err != nil {
		return nil, err
	}
	raw, err := yaml.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode %v: %w", o["metadata"], err)
	}
	s := string(raw)
	if strings.Contains(s, "{{") {
		return nil, fmt.Errorf("%v holds {{, which Helm would take for a template", o["metadata"])
	}
	return []byte(fillPlaceholders(s, items)), nil
}

// withPlaceholders is o, copied when it changes, with placeholders where
// values go: a Deployment's replicas, resources and gated list items, a
// serving Certificate's added names, the codec NetworkPolicy's peers.
func withPlaceholders(o install.Object, items *[]func(indent string) string) (install.Object, error) {
	if o["kind"] == "Deployment" {
		return deploymentPlaceholders(o, items)
	}
	if key, ok := certificateNames[name(o)]; ok && o["kind"] == "Certificate" {
		o = deepCopy(o)
		spec := o["spec"].(map[string]any)
		spec["dnsNames"] = append(spec["dnsNames"].([]any), addItem(items, func(indent string) string {
			return "{{- range .Values." + key + ".dnsNames }}\n" + indent + "- {{ . | quote }}\n{{- end }}\n"
		}))
		if _, ok := spec["ipAddresses"]; ok {
			return nil, fmt.Errorf("certificate %s names ipAddresses, which values replace", name(o))
		}
		spec["ipAddresses"] = "@@ipAddresses." + key + "@@"
	}
	if o["kind"] == "NetworkPolicy" && name(o) == codecName {
		o = deepCopy(o)
		for _, rule := range o["spec"].(map[string]any)["ingress"].([]any) {
			rule.(map[string]any)["from"] = "@@codec.from@@"
		}
	}
	return o, nil
}

// deploymentPlaceholders puts the component's replicas and resources, and
// the placeholders of its containers' and volumes' list items, into a copy of o.
func deploymentPlaceholders(o install.Object, items *[]func(indent string) string) (install.Object, error) {
	key := componentKey(o)
	if key == "" {
		return nil, fmt.Errorf("no values key for Deployment %v", o["metadata"])
	}
	o = deepCopy(o)
	spec := o["spec"].(map[string]any)
	spec["replicas"] = "@@replicas." + key + "@@"
	tmpl := spec["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range tmpl["containers"].([]any) {
		c := c.(map[string]any)
		c["resources"] = "@@resources." + key + "@@"
		for _, field := range []string{"args", "ports", "volumeMounts"} {
			list, _ := c[field].([]any)
			for i, item := range list {
				list[i] = placeholder(items, item)
			}
		}
	}
	vols, _ := tmpl["volumes"].([]any)
	for i, v := range vols {
		vols[i] = placeholder(items, v)
	}
	return o, nil
}

// fillPlaceholders replaces the placeholders in the encoded object s with
// their templates, and deploy/'s literal image, Temporal address and TLS
// Secret with their values.
func fillPlaceholders(s string, items []func(indent string) string) string {
	s = itemRE.ReplaceAllStringFunc(s, func(line string) string {
		m := itemRE.FindStringSubmatch(line)
		var n int
		_, _ = fmt.Sscan(m[2], &n)
		return strings.TrimSuffix(items[n](m[1]), "\n")
	})
	// Adjacent gated items under one gate.
	s = strings.ReplaceAll(s, "{{- end }}\n{{- if "+codecGate+" }}\n", "")
	s = ipAddressesRE.ReplaceAllStringFunc(s, func(line string) string {
		m := ipAddressesRE.FindStringSubmatch(line)
		return fmt.Sprintf("{{- with .Values.%s.ipAddresses }}\n%sipAddresses: {{- toYaml . | nindent %d }}\n{{- end }}", m[2], m[1], len(m[1])+2)
	})
	s = peersRE.ReplaceAllStringFunc(s, func(line string) string {
		m := peersRE.FindStringSubmatch(line)
		return fmt.Sprintf("%s- from: {{- toYaml .Values.codec.networkPolicy.from | nindent %d }}", m[1], len(m[1])+4)
	})
	s = resourcesRE.ReplaceAllStringFunc(s, func(line string) string {
		m := resourcesRE.FindStringSubmatch(line)
		return fmt.Sprintf("%sresources: {{- toYaml .Values.%s.resources | nindent %d }}", m[1], m[2], len(m[1])+2)
	})
	s = placeholderRE.ReplaceAllString(s, "{{ .Values.$2.$1 }}")
	s = strings.ReplaceAll(s, release.Image(), `{{ include "remedy.image" . }}`)
	s = regexp.MustCompile(regexp.QuoteMeta(temporalAddressFlag)+`[^\s"']+`).ReplaceAllString(s, temporalAddressFlag+"{{ .Values.temporal.address }}")
	return strings.ReplaceAll(s, "secretName: "+temporalTLSSecret+"\n", "secretName: {{ .Values.temporal.tls.secretName }}\n")
}

// placeholder returns what stands for a Deployment's list item in the
// encoded object: the item itself, or for an item of the codec server, or
// one after which a value adds an arg, a placeholder whose template items
// records.
func placeholder(items *[]func(indent string) string, item any) any {
	line := func(indent string) string {
		raw, _ := json.Marshal(item) // JSON is YAML's flow style: one line
		return indent + "- " + string(raw) + "\n"
	}
	var write func(indent string) string
	switch {
	case codecItem(item):
		write = func(indent string) string {
			after := ""
			if a, _ := item.(string); strings.HasPrefix(a, codecTLSFlag) {
				after = "{{- with .Values.codec.allowedOrigins }}\n" +
					indent + `- {{ printf "--codec-allowed-origins=%s" (join "," .) | quote }}` + "\n{{- end }}\n"
			}
			return gate(codecGate, line(indent)+after)
		}
	case strings.HasPrefix(fmt.Sprint(item), execGateCertFlag):
		write = func(indent string) string {
			return line(indent) + "{{- with .Values.execGate.url }}\n" +
				indent + `- {{ printf "--exec-gate-url=%s" . | quote }}` + "\n{{- end }}\n"
		}
	default:
		return item
	}
	return addItem(items, write)
}

// addItem records write as the template of a new list item and returns its placeholder.
func addItem(items *[]func(indent string) string, write func(indent string) string) string {
	*items = append(*items, write)
	return fmt.Sprintf("@@item.%d@@", len(*items)-1)
}

// codecItem reports whether a container's arg, port or mount, or a pod's
// volume, is the codec server's.
func codecItem(item any) bool {
	switch v := item.(type) {
	case string:
		return strings.HasPrefix(v, codecFlagPrefix)
	case map[string]any:
		return v["name"] == codecPort || v["name"] == codecVolume
	}
	return false
}

// gate wraps text, lines ending in a newline, in {{ if cond }}.
func gate(cond, text string) string {
	return "{{- if " + cond + " }}\n" + text + "{{- end }}\n"
}

// peersOf is the codec NetworkPolicy's one rule's peers.
func peersOf(o install.Object) (any, error) {
	rules, _ := o["spec"].(map[string]any)["ingress"].([]any)
	if len(rules) != 1 {
		return nil, fmt.Errorf("NetworkPolicy %s has %d ingress rules, not one", codecName, len(rules))
	}
	return rules[0].(map[string]any)["from"], nil
}

func name(o install.Object) string {
	n, _ := o["metadata"].(map[string]any)["name"].(string)
	return n
}

func componentKey(o install.Object) string {
	name, _ := o["metadata"].(map[string]any)["name"].(string)
	for _, c := range components {
		if c.Deployment == name {
			return c.Key
		}
	}
	return ""
}

func deepCopy(o install.Object) install.Object {
	raw, _ := yaml.Marshal(o)
	var c install.Object
	_ = yaml.Unmarshal(raw, &c)
	return c
}

package devenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

var lookPath = exec.LookPath

// run runs a network command and returns its output, or an error with it.
func run(name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("run %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// EgressRules are the filter rules (iptables -S form, without -A) that keep
// Pod and Service traffic on this machine: the host forwards nothing from a
// Pod except onto the Pod bridge, and nothing to a Service IP (no kube-proxy
// translates them). The no-egress test checks each with iptables -C.
func EgressRules() [][]string {
	return [][]string{
		{"-s", PodCIDR, "!", "-o", podBridge, "-j", "DROP"},
		{"-d", ServiceCIDR, "-j", "DROP"},
	}
}

// setUpNetwork brings up the node IP's link, routes the Service range onto
// it and installs the egress and Service rules, all before the first Pod.
func setUpNetwork(apiPort int) error {
	steps := [][]string{
		{"ip", "link", "add", nodeLink, "type", "bridge"},
		{"ip", "addr", "add", NodeIP + "/32", "dev", nodeLink},
		{"ip", "link", "set", nodeLink, "up"},
		// A Service IP never follows the default route out of the machine.
		{"ip", "route", "replace", ServiceCIDR, "dev", nodeLink},
		{"iptables", "-w", "-N", filterChain},
	}
	for _, r := range EgressRules() {
		steps = append(steps, append([]string{"iptables", "-w", "-A", filterChain}, r...))
	}
	steps = append(steps,
		[]string{"iptables", "-w", "-I", "FORWARD", "1", "-j", filterChain},
		[]string{"iptables", "-w", "-t", "nat", "-N", natChain},
		[]string{"iptables", "-w", "-t", "nat", "-A", natChain, "-s", PodCIDR, "-d", kubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443",
			"-j", "DNAT", "--to-destination", NodeIP + ":" + strconv.Itoa(apiPort)},
		[]string{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "1", "-j", natChain},
	)
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return fmt.Errorf("set up the node network: %w", err)
		}
	}
	return nil
}

// iptablesChains lists the chains of table.
func iptablesChains(cmd, table string) ([]string, error) {
	out, err := run(cmd, "-w", "-t", table, "-S")
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
			chains = append(chains, f[1])
		}
	}
	return chains, nil
}

// removeChains deletes chains of table, and first every rule that jumps to one.
func removeChains(cmd, table string, chains []string) error {
	if len(chains) == 0 {
		return nil
	}
	gone := map[string]bool{}
	for _, c := range chains {
		gone[c] = true
	}
	out, err := run(cmd, "-w", "-t", table, "-S")
	if err != nil {
		return err
	}
	var errs []string
	for _, line := range strings.Split(out, "\n") {
		f := splitRule(line)
		if len(f) < 2 || f[0] != "-A" || gone[f[1]] {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && gone[f[i+1]] {
				if _, err := run(cmd, append([]string{"-w", "-t", table, "-D"}, f[1:]...)...); err != nil {
					errs = append(errs, err.Error())
				}
				break
			}
		}
	}
	for _, c := range chains {
		_, _ = run(cmd, "-w", "-t", table, "-F", c)
	}
	for _, c := range chains {
		if _, err := run(cmd, "-w", "-t", table, "-X", c); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove %s chains of table %s: %s", cmd, table, strings.Join(errs, "; "))
	}
	return nil
}

// splitRule splits a line of iptables -S into arguments; comments are quoted.
func splitRule(line string) []string {
	var (
		args   []string
		cur    strings.Builder
		quoted bool
		inArg  bool
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && quoted && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, inArg = !quoted, true
		case c == ' ' && !quoted:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

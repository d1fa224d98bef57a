package actions

// SecretRefMarker replaces an env entry's valueFrom wherever Remedy shows a
// value: whatever the requester may read, Remedy never shows where a value
// comes from out of a Secret (or any other source), only values written inline.
const SecretRefMarker = "<redacted: valueFrom is never shown>"

// ScrubSecretRefs returns v (decoded JSON) with every valueFrom replaced by
// SecretRefMarker; v itself is not changed.
func ScrubSecretRefs(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, vv := range t {
			if k == "valueFrom" && vv != nil {
				out[k] = SecretRefMarker
				continue
			}
			out[k] = ScrubSecretRefs(vv)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, vv := range t {
			out[i] = ScrubSecretRefs(vv)
		}
		return out
	}
	return v
}

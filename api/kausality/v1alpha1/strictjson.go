package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// decodeStrict unmarshals one JSON value, rejecting unknown fields and
// trailing data: a misspelt "mode" must not silently become the default.
func decodeStrict(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// describeJSONError turns decoder errors into messages that name the field.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)
	}
	return err
}

// startsWith reports whether the first non-space byte of s is c.
func startsWith(s string, c byte) bool {
	t := bytes.TrimLeft([]byte(s), " \t\r\n")
	return len(t) > 0 && t[0] == c
}

// parseTime parses an RFC3339 time into UTC. Years outside 0000-9999 are
// refused because RFC3339 cannot write them back.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC3339 time", s)
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("%q is out of range (years 0000-9999 in UTC)", s)
	}
	return t, nil
}

// formatTime writes t as RFC3339 in UTC, with fractions only when present.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// marshal encodes values that are plain strings, numbers and maps; it
// cannot fail for them.
func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kausality: encode %T: %v", v, err))
	}
	return string(b)
}

package seal

import (
	"encoding/json"
	"fmt"
	"reflect"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// PersonEncoding labels an opened payload that a person sent through the
// codec server. Only PersonConverter reads it, and only into a PersonSigned
// value: anywhere else (a workflow's input, an activity's, an internal
// signal) a person's payload is refused, so the codec server's /encode
// cannot be used to speak as Remedy's parts.
const PersonEncoding = "json/remedy-person"

// Person is whom the codec server authenticated (a Kubernetes TokenReview)
// when it sealed a payload.
type Person struct {
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// PersonSigned is a value a person may send: it is told who sent it, and that
// identity replaces whatever name the body gave.
type PersonSigned interface {
	SignedBy(Person)
}

// SealPerson seals a JSON payload a person sent, with their identity.
func (k *Keyring) SealPerson(p *commonpb.Payload, who Person) (*commonpb.Payload, error) {
	if enc := string(p.GetMetadata()[metaEncoder]); enc != converter.MetadataEncodingJSON {
		return nil, fmt.Errorf("a person's payload must be JSON (encoding %q), not %q", converter.MetadataEncodingJSON, enc)
	}
	if who.Username == "" {
		return nil, fmt.Errorf("a person's payload needs an authenticated user")
	}
	id, err := json.Marshal(who)
	if err != nil {
		return nil, fmt.Errorf("marshal person: %w", err)
	}
	inner := &commonpb.Payload{Metadata: map[string][]byte{metaEncoder: []byte(converter.MetadataEncodingJSON), metaPerson: id}, Data: p.Data}
	return k.seal(inner, OriginPerson)
}

// asPersonPayload relabels an opened person's payload so that only PersonConverter reads it.
func asPersonPayload(p *commonpb.Payload) (*commonpb.Payload, error) {
	if len(p.GetMetadata()[metaPerson]) == 0 {
		return nil, refuse(RefusedForged, "a person's payload without a person")
	}
	md := map[string][]byte{metaEncoder: []byte(PersonEncoding), metaPerson: p.Metadata[metaPerson]}
	return &commonpb.Payload{Metadata: md, Data: p.Data}, nil
}

// PersonOf returns who sealed an opened person's payload, for the codec server's /decode.
func PersonOf(p *commonpb.Payload) (Person, bool) {
	var who Person
	if string(p.GetMetadata()[metaEncoder]) != PersonEncoding || json.Unmarshal(p.Metadata[metaPerson], &who) != nil {
		return Person{}, false
	}
	return who, true
}

// PersonConverter decodes a person's payload into a PersonSigned value and
// refuses it into anything else. It never encodes.
type PersonConverter struct{}

var _ converter.PayloadConverter = PersonConverter{}

// Encoding is PersonEncoding.
func (PersonConverter) Encoding() string { return PersonEncoding }

// ToPayload leaves every value to the other converters.
func (PersonConverter) ToPayload(any) (*commonpb.Payload, error) { return nil, nil }

// FromPayload decodes into a PersonSigned value and signs it with the person.
func (PersonConverter) FromPayload(p *commonpb.Payload, valuePtr any) error {
	signed, ok := valuePtr.(PersonSigned)
	if !ok {
		return refuse(RefusedPerson, fmt.Sprintf("a person's payload cannot become a %s: people send approval decisions only", reflect.TypeOf(valuePtr)))
	}
	who, ok := PersonOf(p)
	if !ok {
		return refuse(RefusedForged, "a person's payload without a person")
	}
	if err := json.Unmarshal(p.Data, valuePtr); err != nil {
		return fmt.Errorf("decode a person's payload: %w", err)
	}
	signed.SignedBy(who)
	return nil
}

// ToString shows who sent it and what.
func (PersonConverter) ToString(p *commonpb.Payload) string {
	who, _ := PersonOf(p)
	return fmt.Sprintf("%s (sent by %s)", p.Data, who.Username)
}

package seal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/remedy-dev/remedy/internal/metrics"
)

// The outer payload's metadata. Only "encoding" is read before the seal is
// opened; the key ID and the origin are authenticated as associated data, so
// a payload cannot be relabelled from one origin to another.
const (
	Encoding    = "binary/remedy-sealed"
	metaKey     = "remedy-key"
	metaOrigin  = "remedy-origin"
	metaPerson  = "remedy-person"
	aadPrefix   = "remedy-sealed/v1"
	metaEncoder = "encoding"
)

// Origins: who sealed a payload. Remedy's parts seal with OriginRemedy; the
// codec server seals what a person sends through the Web UI or the temporal
// CLI with OriginPerson and their authenticated identity (person.go), which
// only a person's channels (approval decisions) accept.
const (
	OriginRemedy = "remedy"
	OriginPerson = "person"
)

// Refusal kinds, the label of remedy_payloads_refused_total.
const (
	RefusedUnsealed   = "unsealed"    // not sealed at all
	RefusedUnknownKey = "unknown-key" // sealed under a key this part does not hold
	RefusedForged     = "forged"      // the seal does not open: altered, or another key with the same ID
	RefusedPerson     = "person"      // a person's payload where only Remedy's parts may speak
)

// RefusedError says why a payload was refused. It is permanent: the same
// payload is refused every time.
type RefusedError struct {
	Kind   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("payload refused (%s): %s; only payloads sealed by Remedy's parts are accepted (docs/security.md)", e.Kind, e.Reason)
}

func refuse(kind, reason string) error {
	metrics.PayloadsRefused.WithLabelValues(kind).Inc()
	return &RefusedError{Kind: kind, Reason: reason}
}

// IsRefused reports whether err is, or wraps, a refused payload.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Codec seals every payload it encodes under the keyring's active key and
// opens only payloads sealed under one of its keys.
type Codec struct {
	Keys *Keyring
}

var _ converter.PayloadCodec = (*Codec)(nil)

// Encode seals each payload as Remedy's.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		s, err := c.Keys.seal(p, OriginRemedy)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// Decode opens each payload. A person's payload comes out re-labelled as
// PersonEncoding, so only the converter for a person's channels reads it.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		inner, origin, err := c.Keys.open(p)
		if err != nil {
			return nil, err
		}
		if origin == OriginPerson {
			if inner, err = asPersonPayload(inner); err != nil {
				return nil, err
			}
		}
		out[i] = inner
	}
	return out, nil
}

// seal encrypts p, metadata and data, under the active key.
func (k *Keyring) seal(p *commonpb.Payload, origin string) (*commonpb.Payload, error) {
	plain, err := proto.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("marshal payload: %w", err)
	}
	aead := k.aeads[k.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("read nonce: %w", err)
	}
	return &commonpb.Payload{
		Metadata: map[string][]byte{metaEncoder: []byte(Encoding), metaKey: []byte(k.active), metaOrigin: []byte(origin)},
		Data:     aead.Seal(nonce, nonce, plain, aad(k.active, origin)),
	}, nil
}

// open checks and decrypts a sealed payload, returning what was sealed and who sealed it.
func (k *Keyring) open(p *commonpb.Payload) (*commonpb.Payload, string, error) {
	if string(p.GetMetadata()[metaEncoder]) != Encoding {
		return nil, "", refuse(RefusedUnsealed, fmt.Sprintf("encoding %q", p.GetMetadata()[metaEncoder]))
	}
	id, origin := string(p.Metadata[metaKey]), string(p.Metadata[metaOrigin])
	aead, ok := k.aeads[id]
	if !ok {
		return nil, "", refuse(RefusedUnknownKey, fmt.Sprintf("sealed under key %q, which this part does not hold", id))
	}
	if origin != OriginRemedy && origin != OriginPerson {
		return nil, "", refuse(RefusedForged, fmt.Sprintf("unknown origin %q", origin))
	}
	ns := aead.NonceSize()
	if len(p.Data) < ns+aead.Overhead() {
		return nil, "", refuse(RefusedForged, "too short to be sealed")
	}
	plain, err := aead.Open(nil, p.Data[:ns], p.Data[ns:], aad(id, origin))
	if err != nil {
		return nil, "", refuse(RefusedForged, fmt.Sprintf("the seal under key %q does not open", id))
	}
	var inner commonpb.Payload
	if err := proto.Unmarshal(plain, &inner); err != nil {
		return nil, "", refuse(RefusedForged, "the sealed content is not a payload")
	}
	return &inner, origin, nil
}

func aad(id, origin string) []byte {
	return []byte(aadPrefix + "\x00" + id + "\x00" + origin)
}

// Unseal opens what is sealed in msg (a history, an event) in place, as it
// was before sealing, a person's payload included; an unsealed payload stays
// as it is. Tests record histories this way, so that the committed ones
// replay with the plain converter and name no key.
func (k *Keyring) Unseal(ctx context.Context, msg proto.Message) error {
	return proxy.VisitPayloads(ctx, msg, proxy.VisitPayloadsOptions{
		SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			out := make([]*commonpb.Payload, len(ps))
			for i, p := range ps {
				out[i] = p
				if string(p.GetMetadata()[metaEncoder]) != Encoding {
					continue
				}
				inner, origin, err := k.open(p)
				if err != nil {
					return nil, err
				}
				if origin == OriginPerson {
					// Kept a person's, with who: the workflow authorizes that
					// person, so a replay must see them (PlainDataConverter).
					if inner, err = asPersonPayload(inner); err != nil {
						return nil, err
					}
				}
				out[i] = inner
			}
			return out, nil
		},
	})
}

// SealedWith names the key a payload says it is sealed under, without
// opening it ("" and false: not sealed).
func SealedWith(p *commonpb.Payload) (string, bool) {
	if string(p.GetMetadata()[metaEncoder]) != Encoding {
		return "", false
	}
	return string(p.Metadata[metaKey]), true
}

package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/internal/seal"
)

// Signal and update handlers receive their payload raw (json.RawMessage) so
// that a typo is refused or logged instead of decoding to a default: with a
// typed argument the SDK drops unknown fields before any of our code runs.
// Decoding JSON is deterministic (the SDK does the same for typed arguments);
// workflowcheck flags encoding/json only because it follows reflect into the
// runtime's garbage collector, hence the //workflowcheck:ignore lines.

// decodeStrict decodes a JSON object into v, refusing fields v does not
// declare and anything after the object. The error names the fields v has.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Errorf("the payload is empty; send a JSON object with %s", fieldsOf(v))
	}
	//workflowcheck:ignore
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	//workflowcheck:ignore
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s; the payload is a JSON object with %s", strings.TrimPrefix(err.Error(), "json: "), fieldsOf(v))
	}
	//workflowcheck:ignore
	if dec.More() {
		return errors.New("the payload holds more than one JSON value; send one JSON object")
	}
	return nil
}

// fieldsOf lists the JSON names of a struct's fields, for error messages.
func fieldsOf(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, `"`+name+`"`)
		}
	}
	return "the fields " + strings.Join(names, ", ")
}

// decodeDecide is the strict reading of a decide update: the known fields
// only, and "approved" present, since its absence would mean "reject".
func decodeDecide(raw json.RawMessage) (DecideRequest, error) {
	var req struct {
		DecideRequest
		// Shadows DecideRequest.Approved so a missing field is nil, not false.
		Approved *bool `json:"approved"`
	}
	if err := decodeStrict(raw, &req.DecideRequest); err != nil {
		return DecideRequest{}, fmt.Errorf("decide: %w", err)
	}
	//workflowcheck:ignore
	if err := json.Unmarshal(raw, &req); err != nil {
		return DecideRequest{}, fmt.Errorf("decide: %w", err)
	}
	if req.Approved == nil {
		return DecideRequest{}, errors.New(`decide: "approved" is required: true approves, false rejects`)
	}
	req.DecideRequest.Approved = *req.Approved
	return req.DecideRequest, nil
}

// receiveSignal reads one signal payload from ch into v. A payload that does
// not decode strictly is logged as a Warning; it is still used (leniently
// decoded) unless strict, in which case receiveSignal reports false and the
// caller drops the signal.
func receiveSignal(ctx workflow.Context, ch workflow.ReceiveChannel, v any, strict func() bool) bool {
	var raw json.RawMessage
	ch.Receive(ctx, &raw)
	return useSignal(ctx, ch, raw, v, strict)
}

// receivePersonSignal is receiveSignal for a signal a person may send
// through the codec server: it also returns who sent it (nil when Remedy's
// own parts did).
func receivePersonSignal(ctx workflow.Context, ch workflow.ReceiveChannel, v any, strict func() bool) *seal.Person {
	var p decisionPayload
	ch.Receive(ctx, &p)
	useSignal(ctx, ch, p.raw, v, strict)
	return p.by
}

// useSignal is receiveSignal for a payload already received.
func useSignal(ctx workflow.Context, ch workflow.ReceiveChannel, raw json.RawMessage, v any, strict func() bool) bool {
	err := decodeStrict(raw, v)
	if err == nil {
		return true
	}
	if strict() {
		workflow.GetLogger(ctx).Warn("ignoring signal with a malformed payload", "signal", ch.Name(), "error", err.Error(), "payload", string(raw))
		warnSignal(ctx, ch.Name(), fmt.Sprintf("signal %q was accepted by Temporal but ignored: its payload is malformed: %s (payload %s). %s",
			ch.Name(), err, truncatePayload(raw), preferDecide(ctx)))
		return false
	}
	workflow.GetLogger(ctx).Warn("signal payload is malformed; using the fields it names", "signal", ch.Name(), "error", err.Error(), "payload", string(raw))
	if len(bytes.TrimSpace(raw)) == 0 {
		// No payload at all decodes to the zero value, as it always did.
		return true
	}
	//workflowcheck:ignore
	if uerr := json.Unmarshal(raw, v); uerr != nil {
		workflow.GetLogger(ctx).Warn("ignoring signal that does not decode", "signal", ch.Name(), "error", uerr.Error())
		warnSignal(ctx, ch.Name(), fmt.Sprintf("signal %q was accepted by Temporal but ignored: its payload does not decode: %s (payload %s)",
			ch.Name(), err, truncatePayload(raw)))
		return false
	}
	warnSignal(ctx, ch.Name(), fmt.Sprintf("signal %q has a malformed payload; it was used with the fields it names: %s (payload %s)",
		ch.Name(), err, truncatePayload(raw)))
	return true
}

// strict is receiveSignal's strict for approval decisions: a malformed
// approve or reject is dropped.
func strict() bool { return true }

// lenient is receiveSignal's strict for signals that are used whatever their
// payload says, such as rollback, whose fields only describe the request.
func lenient() bool { return false }

// truncatePayload keeps an Event's note short whatever a sender sent.
func truncatePayload(raw json.RawMessage) string {
	const max = 200
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}

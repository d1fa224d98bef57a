package seal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// Without a cutoff nothing unsealed is accepted anywhere; with one, outside
// workflow and activity code only for a run Track registered as replaying
// before it.
func TestMigrationAcceptsUnsealedOnlyWhereThePreviousReleasePutIt(t *testing.T) {
	keys := ring(t, "a", "a")
	plain, err := converter.GetDefaultDataConverter().ToPayload("old")
	require.NoError(t, err)
	sc := converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: "kexec/ns/old"}
	var s string

	strict := converter.WithDataConverterSerializationContext(DataConverter(keys), sc)
	assert.True(t, IsRefused(strict.FromPayload(plain, &s)), "no cutoff: refused")

	dc := NewDataConverter(keys, time.Now())
	bound := converter.WithDataConverterSerializationContext(dc, sc)
	assert.True(t, IsRefused(bound.FromPayload(plain, &s)), "a run not registered: refused")
	assert.True(t, IsRefused(dc.(converter.ContextAware).WithContext(context.Background()).FromPayload(plain, &s)), "a client: refused")

	before := true
	r := &replay{before: func() bool { return before }}
	replays.Store(sc.WorkflowID, r)
	defer replays.CompareAndDelete(sc.WorkflowID, r)
	require.NoError(t, bound.FromPayload(plain, &s), "replaying before the cutoff: accepted")
	assert.Equal(t, "old", s)
	other := converter.WithDataConverterSerializationContext(dc, converter.WorkflowSerializationContext{WorkflowID: "kexec/ns/new"})
	assert.True(t, IsRefused(other.FromPayload(plain, &s)), "another run: refused")
	before = false
	assert.True(t, IsRefused(bound.FromPayload(plain, &s)), "past the cutoff: refused")

	sealed, err := dc.ToPayload("new")
	require.NoError(t, err)
	assert.Equal(t, Encoding, string(sealed.Metadata[metaEncoder]), "always sealed when encoded")
}

package webhook

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

func TestDeniedEventsOnePerParentPerWindow(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	now := time.Unix(1000, 0)
	e := newDeniedEvents(rec, time.Minute, func() time.Time { return now })
	obj := func(kind, name, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind(kind)
		u.SetName(name)
		u.SetUID(types.UID(uid))
		return u
	}
	web, api, rs := obj("Deployment", "web", "uid-web"), obj("Deployment", "api", "uid-api"), obj("ReplicaSet", "web-1", "uid-rs")

	assert.True(t, e.Record(web, rs, "UPDATE", "alice", "drift"))
	assert.False(t, e.Record(web, rs, "UPDATE", "alice", "drift"), "a retry within the window")
	assert.True(t, e.Record(api, rs, "UPDATE", "alice", "drift"), "another parent")
	now = now.Add(59 * time.Second)
	assert.False(t, e.Record(web, rs, "UPDATE", "alice", "drift"))
	now = now.Add(time.Second)
	assert.True(t, e.Record(web, rs, "DELETE", "bob", "still drift"), "the window passed")
	assert.False(t, (*DeniedEvents)(nil).Record(web, rs, "UPDATE", "alice", "drift"), "no recorder, no Event")

	require.Len(t, rec.Events, 3)
	assert.Equal(t, "Warning DriftDenied denied alice's UPDATE of ReplicaSet web-1: drift", <-rec.Events)
}

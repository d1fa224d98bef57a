package v1alpha1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kausalityWire lists the JSON fields of kausality's callback types
// (github.com/kausality-io/kausality pkg/callback/v1alpha1/types.go), as
// data: a field kausality adds or Remedy drops fails this test.
var kausalityWire = []struct {
	name   string
	typ    any
	fields []string
}{
	{"DriftReport", DriftReport{}, []string{"apiVersion", "kind", "spec"}},
	{"DriftReportSpec", DriftReportSpec{}, []string{"id", "phase", "parent", "child", "oldObject", "newObject", "request"}},
	{"ObjectReference", DriftObjectReference{}, []string{
		"apiVersion", "kind", "namespace", "name", "uid", "generation", "observedGeneration", "lifecyclePhase"}},
	{"RequestContext", DriftRequestContext{}, []string{"user", "groups", "uid", "fieldManager", "operation", "dryRun"}},
	{"DriftReportResponse", DriftReportResponse{}, []string{"apiVersion", "kind", "acknowledged", "error"}},
}

func TestDriftReportHasKausalitysFields(t *testing.T) {
	for _, tt := range kausalityWire {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			rt := reflect.TypeOf(tt.typ)
			for i := range rt.NumField() {
				name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
				got = append(got, name)
			}
			assert.ElementsMatch(t, tt.fields, got)
		})
	}
}

// TestDriftReportRoundTripsKausalitysWireFormat decodes reports as
// kausality's json.Marshal writes them, refusing unknown fields, and encodes
// them back unchanged: a receiver sees the same document from either.
func TestDriftReportRoundTripsKausalitysWireFormat(t *testing.T) {
	tests := []struct {
		name string
		wire string
	}{
		{
			name: "detected update, every field set",
			wire: `{"apiVersion":"kausality.io/v1alpha1","kind":"DriftReport","spec":{
				"id":"a1b2c3d4e5f67890","phase":"Detected",
				"parent":{"apiVersion":"example.com/v1alpha1","kind":"EKSCluster","namespace":"infra","name":"prod","uid":"p-1",
					"generation":5,"observedGeneration":5,"lifecyclePhase":"Initialized"},
				"child":{"apiVersion":"v1","kind":"ConfigMap","namespace":"infra","name":"cluster-config","uid":"abc-123-def","generation":3},
				"oldObject":{"data":{"a":"1"}},"newObject":{"data":{"a":"2"}},
				"request":{"user":"system:serviceaccount:infra:eks-controller","groups":["system:serviceaccounts","system:serviceaccounts:infra"],
					"uid":"abc-123","fieldManager":"eks-controller","operation":"UPDATE","dryRun":true}}}`,
		},
		{
			name: "resolved create, optional fields absent",
			wire: `{"apiVersion":"kausality.io/v1alpha1","kind":"DriftReport","spec":{
				"id":"0123456789abcdef","phase":"Resolved",
				"parent":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
				"child":{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1"},
				"newObject":{"spec":{"replicas":1}},
				"request":{"user":"u","uid":"r-1","operation":"CREATE"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.wire))
			dec.DisallowUnknownFields()
			var r DriftReport
			require.NoError(t, dec.Decode(&r))
			out, err := json.Marshal(r)
			require.NoError(t, err)
			assert.JSONEq(t, tt.wire, string(out))
		})
	}
}

func TestDriftReportResponseWireFormat(t *testing.T) {
	tests := []struct {
		wire string
		want DriftReportResponse
	}{
		{`{"apiVersion":"kausality.io/v1alpha1","kind":"DriftReportResponse","acknowledged":true}`,
			DriftReportResponse{APIVersion: DriftReportAPIVersion, Kind: "DriftReportResponse", Acknowledged: true}},
		{`{"acknowledged":false,"error":"slack is down"}`, DriftReportResponse{Error: "slack is down"}},
	}
	for _, tt := range tests {
		var got DriftReportResponse
		dec := json.NewDecoder(bytes.NewReader([]byte(tt.wire)))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&got))
		assert.Equal(t, tt.want, got)
		out, err := json.Marshal(got)
		require.NoError(t, err)
		assert.JSONEq(t, tt.wire, string(out))
	}
}

package activities

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

func TestPostReport(t *testing.T) {
	report := kv1.DriftReport{APIVersion: kv1.DriftReportAPIVersion, Kind: kv1.DriftReportKind, Spec: kv1.DriftReportSpec{
		ID: "0123456789abcdef", Phase: kv1.DriftReportDetected,
		Parent:    kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Generation: 2},
		Child:     kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-1"},
		NewObject: json.RawMessage(`{"spec":{"replicas":1}}`),
		Request:   kv1.DriftRequestContext{User: "u", Operation: "UPDATE"},
	}}
	const hi = "receiver says hi"
	tests := []struct {
		status int
		// body is the receiver's answer, hi when empty.
		body          string
		wantErr       string
		wantType      string
		wantPermanent bool
	}{
		{status: http.StatusOK},
		{status: http.StatusAccepted},
		{status: http.StatusOK, body: `{"acknowledged":true}`},
		{status: http.StatusAccepted, body: `{"apiVersion":"kausality.io/v1alpha1","kind":"DriftReportResponse","acknowledged":true}`},
		{status: http.StatusOK, body: " "},
		{status: http.StatusOK, body: `{"acknowledged":false,"error":"slack is down"}`, wantErr: "slack is down", wantType: ReasonCallbackNotAcknowledged},
		{status: http.StatusOK, body: `{}`, wantErr: "not acknowledged", wantType: ReasonCallbackNotAcknowledged},
		{status: http.StatusInternalServerError, wantErr: hi},
		{status: http.StatusServiceUnavailable, wantErr: hi},
		{status: http.StatusRequestTimeout, wantErr: hi},
		{status: http.StatusTooManyRequests, wantErr: hi},
		{status: http.StatusNotFound, wantErr: hi, wantType: ReasonCallbackRejected, wantPermanent: true},
		{status: http.StatusBadRequest, wantErr: hi, wantType: ReasonCallbackRejected, wantPermanent: true},
		{status: http.StatusUnauthorized, wantErr: hi, wantType: ReasonCallbackRejected, wantPermanent: true},
	}
	for _, tt := range tests {
		if tt.body == "" {
			tt.body = hi
		}
		t.Run(http.StatusText(tt.status)+" "+tt.body, func(t *testing.T) {
			var got kv1.DriftReport
			var contentType string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				contentType = r.Header.Get("Content-Type")
				b, _ := io.ReadAll(r.Body)
				assert.NoError(t, json.Unmarshal(b, &got))
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()

			err := runPost(t, &Drift{HTTP: srv.Client()}, PostReportInput{URL: srv.URL + "/drift", Report: report})
			assert.Equal(t, report, got, "the receiver gets the whole report")
			assert.Equal(t, "application/json", contentType)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "got %T", err)
			assert.Equal(t, tt.wantPermanent, app.NonRetryable())
			if tt.wantType != "" {
				assert.Equal(t, tt.wantType, app.Type())
			}
		})
	}
}

func TestPostReportUnreachableIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := runPost(t, &Drift{HTTP: &http.Client{Timeout: time.Second}}, PostReportInput{URL: url})
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.False(t, app.NonRetryable())
}

func TestPostReportBadURLIsPermanent(t *testing.T) {
	err := runPost(t, &Drift{HTTP: http.DefaultClient}, PostReportInput{URL: "http://bad host/"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.True(t, app.NonRetryable())
	assert.Equal(t, ReasonInvalidParameters, app.Type())
}

func runPost(t *testing.T, d *Drift, in PostReportInput) error {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(d)
	_, err := env.ExecuteActivity(d.PostReport, in)
	return err
}

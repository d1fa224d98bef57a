package drift

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestPostReport(t *testing.T) {
	report := kv1.DriftReport{APIVersion: kv1.DriftReportAPIVersion, Kind: kv1.DriftReportKind, Spec: kv1.DriftReportSpec{
		ID: "0123456789abcdef", Phase: kv1.DriftReportDetected,
		Parent:    kv1.DriftObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: webParent.UID, Generation: 2},
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
		{status: http.StatusOK, body: `{"acknowledged":false,"error":"slack is down"}`, wantErr: "slack is down", wantType: v1alpha1.ReasonCallbackNotAcknowledged},
		{status: http.StatusOK, body: `{}`, wantErr: "not acknowledged", wantType: v1alpha1.ReasonCallbackNotAcknowledged},
		{status: http.StatusOK, body: "{\"acknowledged\":false,\"error\":\"multi\\nline " + strings.Repeat("x", 300) + "\"}", wantErr: "multi line xxx", wantType: v1alpha1.ReasonCallbackNotAcknowledged},
		{status: http.StatusInternalServerError, wantErr: "500 Internal Server Error"},
		{status: http.StatusServiceUnavailable, wantErr: "503 Service Unavailable"},
		{status: http.StatusRequestTimeout, wantErr: "408 Request Timeout"},
		{status: http.StatusTooManyRequests, wantErr: "429 Too Many Requests"},
		{status: http.StatusNotFound, wantErr: "404 Not Found", wantType: v1alpha1.ReasonCallbackRejected, wantPermanent: true},
		{status: http.StatusBadRequest, wantErr: "400 Bad Request", wantType: v1alpha1.ReasonCallbackRejected, wantPermanent: true},
		{status: http.StatusUnauthorized, wantErr: "401 Unauthorized", wantType: v1alpha1.ReasonCallbackRejected, wantPermanent: true},
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

			d, _ := newDriftActivities()
			d.Gate.Callbacks, d.Config.CallbackURLs = srv.Client(), []string{srv.URL + "/drift"}
			err := asDriftWorkflow(t, d, d.PostReport, PostReportInput{URL: srv.URL + "/drift", Report: report})
			assert.Equal(t, report, got, "the receiver gets the whole report")
			assert.Equal(t, "application/json", contentType)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), hi, "a receiver's body stays out of the run")
			assert.NotContains(t, err.Error(), strings.Repeat("x", maxReceiverError+1), "a receiver's error is cut short")
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
	err := runPost(t, &http.Client{Timeout: time.Second}, PostReportInput{URL: url, Report: ofWeb()}, url)
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.False(t, app.NonRetryable())
}

func TestPostReportBadURLIsPermanent(t *testing.T) {
	err := runPost(t, http.DefaultClient, PostReportInput{URL: "http://bad host/", Report: ofWeb()}, "http://bad host/")
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	assert.True(t, app.NonRetryable())
	assert.Equal(t, v1alpha1.ReasonInvalidParameters, app.Type())
}

// A report goes only to a URL configured now, and only from the parent's
// own drift workflow: a forged run reaches no address of its choosing.
func TestPostReportOnlyToConfiguredURLs(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { posts.Add(1) }))
	defer srv.Close()
	other := ofWeb()
	other.Spec.Parent.UID = "uid-other"
	for _, tt := range []struct {
		name       string
		configured string
		report     kv1.DriftReport
		wantType   string
	}{
		{name: "not configured", configured: "https://elsewhere.example/drift", report: ofWeb(), wantType: v1alpha1.ReasonCallbackNotConfigured},
		{name: "another parent's workflow", configured: srv.URL, report: other, wantType: v1alpha1.ReasonSubjectMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := runPost(t, srv.Client(), PostReportInput{URL: srv.URL, Report: tt.report}, tt.configured)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "got %v", err)
			assert.True(t, app.NonRetryable())
			assert.Equal(t, tt.wantType, app.Type())
		})
	}
	assert.Zero(t, posts.Load(), "nothing was posted")
}

func ofWeb() kv1.DriftReport {
	return kv1.DriftReport{Spec: kv1.DriftReportSpec{Parent: kv1.DriftObjectReference{Namespace: "shop", Name: "web", UID: webParent.UID}}}
}

// runPost posts as webParent's drift workflow, with the worker configured for url.
func runPost(t *testing.T, c *http.Client, in PostReportInput, url string) error {
	t.Helper()
	d, _ := newDriftActivities()
	d.Gate.Callbacks, d.Config.CallbackURLs = c, []string{url}
	return asDriftWorkflow(t, d, d.PostReport, in)
}

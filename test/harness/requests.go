package harness

import (
	"io"
	"net/http"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// requests counts the API requests the in-process operator and worker make
// (their admission webhooks included), by kind, for the benchmarks; watches
// and leader-election leases are background, not work of a run.
var requests = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// APIRequests returns a copy of the counts so far, keyed "<verb> <resource>"
// (e.g. "create subjectaccessreviews", "get kubernetesexecutions").
func APIRequests() map[string]int {
	requests.Lock()
	defer requests.Unlock()
	out := make(map[string]int, len(requests.n))
	for k, v := range requests.n {
		out[k] = v
	}
	return out
}

type countRequests struct{ next http.RoundTripper }

func (c countRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, ok := requestKey(r); ok {
		requests.Lock()
		requests.n[key]++
		requests.Unlock()
		if key == "create subjectaccessreviews" {
			recordReview(r)
		}
	}
	return c.next.RoundTrip(r)
}

// reviews are the SubjectAccessReviews the in-process operator and worker
// asked, in order, for tests of what a review carries (the user's extra).
var reviews = struct {
	sync.Mutex
	specs []authorizationv1.SubjectAccessReviewSpec
}{}

// SubjectAccessReviews returns the specs of the reviews asked so far for
// user ("": for anyone).
func SubjectAccessReviews(user string) []authorizationv1.SubjectAccessReviewSpec {
	reviews.Lock()
	defer reviews.Unlock()
	var out []authorizationv1.SubjectAccessReviewSpec
	for _, s := range reviews.specs {
		if user == "" || s.User == user {
			out = append(out, s)
		}
	}
	return out
}

func recordReview(r *http.Request) {
	if r.GetBody == nil {
		return
	}
	body, err := r.GetBody()
	if err != nil {
		return
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	if err != nil {
		return
	}
	// JSON or protobuf, as the client sent it.
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	sar, ok := obj.(*authorizationv1.SubjectAccessReview)
	if err != nil || !ok {
		return
	}
	reviews.Lock()
	reviews.specs = append(reviews.specs, sar.Spec)
	reviews.Unlock()
}

// requestKey names a request by verb and resource, as the API server's
// request metrics do; it drops watches and leases.
func requestKey(r *http.Request) (string, bool) {
	if r.URL.Query().Get("watch") == "true" || strings.Contains(r.URL.Path, "/leases") {
		return "", false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/..., /apis/<group>/<version>/...: skip the prefix, then namespaces/<ns>.
	if len(parts) > 0 && parts[0] == "api" {
		parts = parts[min(2, len(parts)):]
	} else {
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "", false
	}
	resource := parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	if verb == "get" && len(parts) == 1 {
		verb = "list"
	}
	return verb + " " + resource, true
}

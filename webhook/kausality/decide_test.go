package kausality

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

type decideCase struct {
	name     string
	req      Request
	allowed  bool
	code     int32
	decision DecisionKind
	reason   []string // substrings of Reason
	check    func(t *testing.T, res Result)
}

func runDecide(t *testing.T, tests []decideCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Decide(tt.req)
			assert.Equal(t, tt.decision, res.Decision, res.Reason)
			assert.Equal(t, tt.allowed, res.Allowed, res.Reason)
			assert.Equal(t, tt.code, res.Code)
			for _, s := range tt.reason {
				assert.Contains(t, res.Reason, s)
			}
			if !res.Allowed {
				assert.Nil(t, res.Annotations, "no annotation changes on denial")
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func with(r Request, f func(r *Request)) Request { f(&r); return r }

// TestResponseCodes has one row per response code docs/drift.md lists.
func TestResponseCodes(t *testing.T) {
	runDecide(t, []decideCase{
		{name: "parent deleting", req: with(update(), func(r *Request) {
			r.Parent.Deleting = true
			r.Parent.Annotations[kv1.AnnotationFreeze] = "true" // freeze does not apply while deleting
		}), allowed: true, decision: DecisionParentDeleting},
		{name: "parent initializing", req: with(update(), func(r *Request) {
			delete(r.Parent.Annotations, kv1.AnnotationPhase)
			r.Parent.Conditions = nil
		}), allowed: true, decision: DecisionInitializing},
		{name: "parent frozen", req: with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationFreeze] = `{"user":"carol","message":"incident 42","at":"2026-03-01T10:00:00Z"}`
		}), code: 403, decision: DecisionFrozen,
			reason: []string{"Deployment demo/web", "incident 42", "2026-03-01T10:00:00Z"}, check: notNaming("carol")},
		{name: "expected change", req: with(update(), func(r *Request) {
			r.Parent.Generation = 4
		}), allowed: true, decision: DecisionExpected, check: func(t *testing.T, res Result) {
			assert.Nil(t, res.Drift)
		}},
		{name: "drift with valid approval", req: with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 3, Mode: kv1.ApprovalGeneration})
			r.DefaultMode = kv1.ModeEnforce
		}), allowed: true, decision: DecisionDriftApproved, check: func(t *testing.T, res Result) {
			require.NotNil(t, res.Drift)
			assert.True(t, res.Drift.Approved)
			assert.Equal(t, kv1.ApprovalGeneration, res.Drift.Approval.Mode)
		}},
		{name: "drift rejected", req: with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","reason":"capacity freeze"}]`
			// rejections win over approvals
			r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(kv1.Approval{APIVersion: "*", Kind: "*", Name: "*", Mode: kv1.ApprovalAlways})
		}), code: 403, decision: DecisionDriftRejected, reason: []string{"capacity freeze", "ReplicaSet demo/web-1"},
			check: func(t *testing.T, res Result) {
				require.NotNil(t, res.Drift)
				assert.True(t, res.Drift.Rejected)
				assert.False(t, res.Drift.Approved)
			}},
		{name: "drift snoozed follows the mode (log)", req: with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationSnooze] = `{"expiry":"2026-03-01T13:00:00Z","user":"bob","message":"known"}`
		}), allowed: true, decision: DecisionDriftLogged, check: func(t *testing.T, res Result) {
			assert.True(t, res.Drift.Snoozed)
		}},
		{name: "drift snoozed follows the mode (enforce)", req: with(update(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationSnooze] = "2026-03-01T13:00:00Z"
			r.DefaultMode = kv1.ModeEnforce
		}), code: 403, decision: DecisionDriftDenied, check: func(t *testing.T, res Result) {
			assert.True(t, res.Drift.Snoozed)
			assert.True(t, res.Drift.Denied)
		}},
		{name: "drift without approval, enforce", req: with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
		}), code: 403, decision: DecisionDriftDenied, reason: []string{"drift", "ReplicaSet demo/web-1", "Deployment demo/web", dc},
			check: func(t *testing.T, res Result) {
				require.NotNil(t, res.Drift)
				assert.Equal(t, Drift{Denied: true, Mode: kv1.ModeEnforce, UserHash: dcHash}, *res.Drift)
				assert.Empty(t, res.Warnings)
			}},
		{name: "drift without approval, log", req: update(), allowed: true, decision: DecisionDriftLogged,
			check: func(t *testing.T, res Result) {
				require.NotNil(t, res.Drift)
				assert.Equal(t, Drift{Mode: kv1.ModeLog, UserHash: dcHash}, *res.Drift)
				require.Len(t, res.Warnings, 1)
				assert.Contains(t, res.Warnings[0], "drift")
				assert.NotNil(t, res.Annotations, "the trace is still recomputed")
			}},
		{name: "no controller ownerReference", req: with(update(), func(r *Request) { r.Parent = nil }),
			allowed: true, decision: DecisionNoParent},
		{name: "error resolving parent", req: with(update(), func(r *Request) {
			r.Parent, r.ParentErr = nil, errors.New("apps/v1 Deployment demo/web: connection refused")
		}), code: 500, decision: DecisionParentError, reason: []string{"connection refused"}},
	})
}

// TestOperations: CREATE and DELETE follow the same drift rules as UPDATE.
func TestOperations(t *testing.T) {
	runDecide(t, []decideCase{
		{name: "create during drift, enforce", req: with(create(), func(r *Request) { r.DefaultMode = kv1.ModeEnforce }),
			code: 403, decision: DecisionDriftDenied},
		{name: "create while initializing", req: with(create(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			delete(r.Parent.Annotations, kv1.AnnotationPhase)
			r.Parent.Conditions = nil
		}), allowed: true, decision: DecisionInitializing},
		{name: "create expected", req: with(create(), func(r *Request) { r.Parent.Generation = 4 }),
			allowed: true, decision: DecisionExpected},
		{name: "delete during drift, enforce", req: with(del(), func(r *Request) { r.DefaultMode = kv1.ModeEnforce }),
			code: 403, decision: DecisionDriftDenied},
		{name: "delete approved once", req: with(del(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 3, Mode: kv1.ApprovalOnce})
		}), allowed: true, decision: DecisionDriftApproved, check: func(t *testing.T, res Result) {
			assert.Nil(t, res.Annotations, "no annotation changes on DELETE")
			require.NotNil(t, res.ParentUpdate)
			assert.NotNil(t, res.ParentUpdate.ConsumeOnce)
		}},
		{name: "delete by a person is a new origin", req: with(del(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.User = User{Name: alice}
		}), allowed: true, decision: DecisionNewOrigin, check: func(t *testing.T, res Result) {
			assert.Nil(t, res.Annotations)
		}},
		{name: "delete while parent deleting", req: with(del(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Deleting = true
		}), allowed: true, decision: DecisionParentDeleting},
		{name: "webhook's own write", req: with(update(), func(r *Request) { r.FromWebhook = true; r.DefaultMode = kv1.ModeEnforce }),
			allowed: true, decision: DecisionFromWebhook, check: func(t *testing.T, res Result) { assert.Nil(t, res.Annotations) }},
		{name: "scale subresource untouched", req: with(update(), func(r *Request) { r.SubResource = "scale"; r.DefaultMode = kv1.ModeEnforce }),
			allowed: true, decision: DecisionSubresource},
		{name: "update without old object", req: with(update(), func(r *Request) { r.OldObject = nil }),
			code: 400, decision: DecisionInvalidRequest},
	})
}

// TestFreeze: freeze denies everyone's spec changes, expected ones too.
func TestFreeze(t *testing.T) {
	frozen := func(v string) func(r *Request) {
		return func(r *Request) { r.Parent.Annotations[kv1.AnnotationFreeze] = v }
	}
	runDecide(t, []decideCase{
		{name: "legacy true", req: with(update(), frozen("true")), code: 403, decision: DecisionFrozen, reason: []string{"frozen"}},
		{name: "expected change", req: with(with(update(), frozen("true")), func(r *Request) { r.Parent.Generation = 4 }),
			code: 403, decision: DecisionFrozen},
		{name: "a person's change", req: with(with(update(), frozen("true")), func(r *Request) { r.User = User{Name: alice} }),
			code: 403, decision: DecisionFrozen},
		{name: "unparseable freeze still freezes", req: with(update(), frozen("yes please")), code: 403, decision: DecisionFrozen,
			reason: []string{"does not parse", kv1.AnnotationFreeze}},
		{name: "metadata-only change passes", req: with(with(update(), frozen("true")), func(r *Request) {
			r.Object = rs(1, childAnn())
			r.Object.SetLabels(map[string]string{"team": "a"})
		}), allowed: true, decision: DecisionMetadataOnly},
		{name: "an initializing parent is frozen too", req: with(with(update(), frozen("true")), func(r *Request) {
			delete(r.Parent.Annotations, kv1.AnnotationPhase)
			r.Parent.Conditions = nil
		}), code: 403, decision: DecisionFrozen},
		{name: "false is not frozen", req: with(update(), frozen("false")), allowed: true, decision: DecisionDriftLogged},
	})
}

// TestControllerIdentification covers the user hash algorithm.
func TestControllerIdentification(t *testing.T) {
	updaters := func(hs ...string) func(r *Request) {
		return func(r *Request) {
			a := childAnn()
			a[kv1.AnnotationUpdaters] = kv1.FormatUserHashes(hs)
			r.OldObject = rs(1, a)
			r.Object = rs(2, a)
			r.DefaultMode = kv1.ModeEnforce
		}
	}
	runDecide(t, []decideCase{
		{name: "single updater is the controller", req: with(update(), updaters(dcHash)), code: 403, decision: DecisionDriftDenied},
		{name: "single updater, someone else", req: with(with(update(), updaters(dcHash)), func(r *Request) { r.User = User{Name: alice} }),
			allowed: true, decision: DecisionNewOrigin},
		{name: "a person who is the only updater is not the controller", req: with(with(update(), updaters(aliceHash)), func(r *Request) { r.User = User{Name: alice} }),
			allowed: true, decision: DecisionNewOrigin},
		{name: "several updaters, intersection with controllers", req: with(update(), updaters(aliceHash, dcHash)), code: 403, decision: DecisionDriftDenied},
		{name: "several updaters, requester outside the intersection", req: with(with(update(), updaters(aliceHash, dcHash)), func(r *Request) { r.User = User{Name: alice} }),
			allowed: true, decision: DecisionNewOrigin},
		{name: "several updaters, no parent controllers", req: with(with(update(), updaters(aliceHash, dcHash)), func(r *Request) {
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
		}), allowed: true, decision: DecisionUnknownController},
		{name: "several updaters, none a controller: the parent's controllers decide", req: with(update(), updaters(aliceHash, bobHash)), code: 403, decision: DecisionDriftDenied},
		{name: "no parent controllers, the requester the only updater", req: with(with(update(), updaters(aliceHash)), func(r *Request) {
			r.User = User{Name: alice}
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
		}), code: 403, decision: DecisionDriftDenied},
		{name: "no updaters (late install), parent controllers decide", req: with(update(), updaters()), code: 403, decision: DecisionDriftDenied},
		{name: "create, parent controllers decide", req: with(create(), func(r *Request) { r.DefaultMode = kv1.ModeEnforce }),
			code: 403, decision: DecisionDriftDenied},
		{name: "create, no parent controllers: the creator is taken for the controller", req: with(create(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
		}), code: 403, decision: DecisionDriftDenied},
		{name: "create, no parent controllers, parent reconciling", req: with(create(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Generation = 4
			delete(r.Parent.Annotations, kv1.AnnotationControllers)
		}), allowed: true, decision: DecisionExpected},
		{name: "user identified by UID when nameless", req: with(with(update(), updaters(dcHash)), func(r *Request) {
			r.User = User{UID: "uid-7"}
			r.Parent.Annotations[kv1.AnnotationControllers] = kv1.UserHash("", "uid-7")
		}), code: 403, decision: DecisionDriftDenied},
	})
}

// TestMode: the object's mode, then the namespace's, then the default.
func TestMode(t *testing.T) {
	mode := func(obj, ns string, def kv1.Mode) Request {
		return with(update(), func(r *Request) {
			if obj != "" {
				a := childAnn()
				a[kv1.AnnotationMode] = obj
				r.OldObject, r.Object = rs(1, a), rs(2, a)
			}
			r.NamespaceMode, r.DefaultMode = ns, def
		})
	}
	warns := func(n int) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) { assert.Len(t, res.Warnings, n, res.Warnings) }
	}
	runDecide(t, []decideCase{
		{name: "object enforce beats namespace log", req: mode("enforce", "log", kv1.ModeLog), code: 403, decision: DecisionDriftDenied},
		{name: "object log beats namespace enforce", req: mode("log", "enforce", kv1.ModeEnforce), allowed: true, decision: DecisionDriftLogged},
		{name: "namespace beats default", req: mode("", "enforce", kv1.ModeLog), code: 403, decision: DecisionDriftDenied},
		{name: "default", req: mode("", "", kv1.ModeEnforce), code: 403, decision: DecisionDriftDenied},
		{name: "no default means log", req: mode("", "", ""), allowed: true, decision: DecisionDriftLogged},
		{name: "unparseable object mode is skipped", req: mode("strict", "enforce", kv1.ModeLog), code: 403, decision: DecisionDriftDenied,
			check: warns(1)},
		{name: "unparseable namespace mode is skipped", req: mode("", "strict", kv1.ModeLog), allowed: true, decision: DecisionDriftLogged,
			check: warns(2)},
		{name: "the controller's new mode does not count", req: with(mode("log", "", kv1.ModeLog), func(r *Request) {
			r.Object.SetAnnotations(map[string]string{kv1.AnnotationMode: "enforce"})
		}), allowed: true, decision: DecisionDriftLogged},
		{name: "create: mode copied from the parent does not count", req: with(create(), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationMode] = "enforce"
			r.Object.SetAnnotations(map[string]string{kv1.AnnotationMode: "enforce"})
		}), allowed: true, decision: DecisionDriftLogged},
		{name: "create: own mode counts", req: with(create(), func(r *Request) {
			r.Object.SetAnnotations(map[string]string{kv1.AnnotationMode: "enforce"})
		}), code: 403, decision: DecisionDriftDenied},
	})
}

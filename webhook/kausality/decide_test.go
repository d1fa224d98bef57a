package kausality

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestApprovals covers approval modes, consumption and pruning.
func TestApprovals(t *testing.T) {
	web1 := func(gen int64, m kv1.ApprovalMode) kv1.Approval {
		return kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: gen, Mode: m}
	}
	approved := func(as ...kv1.Approval) Request {
		return with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Annotations[kv1.AnnotationApprovals] = approvals(as...)
		})
	}
	pu := func(want ParentUpdate) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			if want == (ParentUpdate{}) {
				assert.Nil(t, res.ParentUpdate)
				return
			}
			require.NotNil(t, res.ParentUpdate)
			assert.Equal(t, want, *res.ParentUpdate)
		}
	}
	once := web1(3, kv1.ApprovalOnce)
	runDecide(t, []decideCase{
		{name: "once is consumed", req: approved(once), allowed: true, decision: DecisionDriftApproved, check: func(t *testing.T, res Result) {
			pu(ParentUpdate{ConsumeOnce: &once})(t, res)
			tr := mustTrace(*res.Annotations[kv1.AnnotationTrace])
			assert.Equal(t, map[string]string{"kausality.io/approval": "once"}, tr[len(tr)-1].Labels)
		}},
		{name: "once already consumed is absent", req: with(approved(once), func(r *Request) { r.ConsumedOnce = []kv1.Approval{once} }),
			code: 403, decision: DecisionDriftDenied},
		{name: "once for another generation is stale and pruned", req: approved(web1(2, kv1.ApprovalOnce)),
			code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "generation valid while it matches", req: approved(web1(3, kv1.ApprovalGeneration)),
			allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{})},
		{name: "generation moved on", req: approved(web1(2, kv1.ApprovalGeneration)),
			code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "always stays", req: approved(web1(0, kv1.ApprovalAlways)), allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{})},
		{name: "always preferred over once", req: approved(once, web1(0, kv1.ApprovalAlways)), allowed: true, decision: DecisionDriftApproved,
			check: func(t *testing.T, res Result) {
				assert.Equal(t, kv1.ApprovalAlways, res.Drift.Approval.Mode)
				assert.Nil(t, res.ParentUpdate, "the once approval is not spent")
			}},
		{name: "wildcards", req: approved(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "*", Generation: 3, Mode: kv1.ApprovalGeneration}),
			allowed: true, decision: DecisionDriftApproved},
		{name: "other child", req: approved(kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2", Mode: kv1.ApprovalAlways}),
			code: 403, decision: DecisionDriftDenied},
		{name: "stale approvals pruned on expected changes too", req: with(approved(web1(3, kv1.ApprovalOnce)), func(r *Request) { r.Parent.Generation = 4 }),
			allowed: true, decision: DecisionExpected, check: pu(ParentUpdate{PruneApprovals: true})},
		{name: "unparseable approvals approve nothing", req: with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			r.Parent.Annotations[kv1.AnnotationApprovals] = `[{"kind":"ReplicaSet"}]`
		}), code: 403, decision: DecisionDriftDenied, check: func(t *testing.T, res Result) {
			require.Len(t, res.Warnings, 1)
			assert.Contains(t, res.Warnings[0], "apiVersion is required")
		}},
		{name: "unparseable rejections deny", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `{"reason":"x"}`
		}), code: 403, decision: DecisionDriftRejected, reason: []string{kv1.AnnotationRejections, "does not parse"}},
		{name: "rejection for another generation does not apply", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","generation":2,"reason":"old"}]`
		}), allowed: true, decision: DecisionDriftApproved},
		{name: "rejection for this generation applies", req: with(approved(web1(0, kv1.ApprovalAlways)), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","generation":3,"reason":"now"}]`
		}), code: 403, decision: DecisionDriftRejected, reason: []string{"now"}},
		{name: "once naming the parent's metadata.generation is consumed", req: with(approved(web1(7, kv1.ApprovalOnce)), func(r *Request) {
			r.Parent.MetadataGeneration = 7 // annotation edits since the spec change at 3
		}), allowed: true, decision: DecisionDriftApproved, check: pu(ParentUpdate{ConsumeOnce: ptr(web1(7, kv1.ApprovalOnce))})},
		{name: "naming a generation ahead of the parent's metadata.generation: kept", req: with(approved(web1(8, kv1.ApprovalOnce)), func(r *Request) {
			r.Parent.MetadataGeneration = 7
		}), code: 403, decision: DecisionDriftDenied, check: pu(ParentUpdate{})},
		{name: "denied request consumes nothing", req: with(approved(once), func(r *Request) {
			r.Parent.Annotations[kv1.AnnotationRejections] = `[{"apiVersion":"*","kind":"*","name":"*","reason":"no"}]`
		}), code: 403, decision: DecisionDriftRejected, check: pu(ParentUpdate{})},
	})
}

// TestLifecycle covers initialization detection order and the high-water mark.
func TestLifecycle(t *testing.T) {
	state := func(phase string, og *int64, conds ...Condition) Request {
		return with(update(), func(r *Request) {
			r.DefaultMode = kv1.ModeEnforce
			delete(r.Parent.Annotations, kv1.AnnotationPhase)
			if phase != "" {
				r.Parent.Annotations[kv1.AnnotationPhase] = phase
			}
			r.Parent.ObservedGeneration = og
			r.Parent.Conditions = conds
		})
	}
	records := func(want string) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			if want == "" {
				if res.ParentUpdate != nil {
					assert.Empty(t, res.ParentUpdate.Phase)
				}
				return
			}
			require.NotNil(t, res.ParentUpdate)
			assert.Equal(t, want, res.ParentUpdate.Phase)
		}
	}
	g3 := ptr(int64(3))
	runDecide(t, []decideCase{
		{name: "phase annotation", req: state(kv1.PhaseInitialized, g3), code: 403, decision: DecisionDriftDenied, check: records("")},
		{name: "phase annotation is a high-water mark", req: state(kv1.PhaseInitialized, g3, Condition{"Ready", "False"}),
			code: 403, decision: DecisionDriftDenied, check: records("")},
		{name: "Initialized=True", req: state("", g3, Condition{"Initialized", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "Ready=True", req: state("", g3, Condition{"Ready", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "observed with Available=True", req: state("", g3, Condition{"Available", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "phase initializing, now Ready", req: state(kv1.PhaseInitializing, g3, Condition{"Ready", "True"}), code: 403, decision: DecisionDriftDenied,
			check: records(kv1.PhaseInitialized)},
		{name: "Available but not observed", req: state("", ptr(int64(2)), Condition{"Available", "True"}), allowed: true, decision: DecisionInitializing,
			check: records("")},
		{name: "Available without observedGeneration", req: state("", nil, Condition{"Available", "True"}), allowed: true, decision: DecisionInitializing},
		{name: "observed but only Synced", req: state("", g3, Condition{"Synced", "True"}, Condition{"Ready", "False"}), allowed: true, decision: DecisionInitializing},
		{name: "phase initializing, no conditions", req: state(kv1.PhaseInitializing, g3), allowed: true, decision: DecisionInitializing},
		{name: "Ready=True with observedGeneration behind is initialized, and expected", req: state("", ptr(int64(2)), Condition{"Ready", "True"}),
			allowed: true, decision: DecisionExpected, check: records(kv1.PhaseInitialized)},
		{name: "no observedGeneration at all is lenient", req: state(kv1.PhaseInitialized, nil), allowed: true, decision: DecisionExpected},
		{name: "observedGeneration past the spec generation is not expected", req: state(kv1.PhaseInitialized, ptr(int64(5))),
			code: 403, decision: DecisionDriftDenied},
	})
}

// TestSnooze: snooze only marks drift as snoozed while it has not expired.
func TestSnooze(t *testing.T) {
	snooze := func(v string) Request {
		return with(update(), func(r *Request) { r.Parent.Annotations[kv1.AnnotationSnooze] = v })
	}
	snoozed := func(want bool, warnings int) func(t *testing.T, res Result) {
		return func(t *testing.T, res Result) {
			require.NotNil(t, res.Drift)
			assert.Equal(t, want, res.Drift.Snoozed)
			assert.Equal(t, want, !res.Drift.SnoozedUntil.IsZero(), "the expiry travels with the drift")
			assert.Len(t, res.Warnings, warnings+1, res.Warnings) // +1: the log-mode drift warning
		}
	}
	runDecide(t, []decideCase{
		{name: "active", req: snooze(`{"expiry":"2026-03-01T12:00:01Z"}`), allowed: true, decision: DecisionDriftLogged, check: func(t *testing.T, res Result) {
			snoozed(true, 0)(t, res)
			assert.Equal(t, time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC), res.Drift.SnoozedUntil.UTC())
		}},
		{name: "expired", req: snooze(`{"expiry":"2026-03-01T12:00:00Z"}`), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 0)},
		{name: "legacy active", req: snooze("2026-03-02T00:00:00+01:00"), allowed: true, decision: DecisionDriftLogged, check: snoozed(true, 0)},
		{name: "legacy expired", req: snooze("2026-02-28T00:00:00Z"), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 0)},
		{name: "unparseable does not snooze", req: snooze("later"), allowed: true, decision: DecisionDriftLogged, check: snoozed(false, 1)},
	})
}

// TestApprovalGenerationsWarnedAtAdmission: a person writing approvals on
// a parent whose spec last changed at generation 3 while its
// metadata.generation is 7 is warned about an approval that can never apply.
func TestApprovalGenerationsWarnedAtAdmission(t *testing.T) {
	deployment := func(approvals string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"namespace": "demo", "name": "web", "generation": int64(7)},
			"spec":     map[string]any{"replicas": int64(2)},
		}}
		if approvals != "" {
			u.SetAnnotations(map[string]string{kv1.AnnotationApprovals: approvals})
		}
		return u
	}
	rs1 := func(gen int64, m kv1.ApprovalMode) kv1.Approval {
		return kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: gen, Mode: m}
	}
	write := func(old string, as ...kv1.Approval) Request {
		return Request{Operation: Update, User: User{Name: alice}, OldObject: deployment(old), Object: deployment(approvals(as...)),
			SpecGeneration: 3, DefaultMode: kv1.ModeLog, Now: now}
	}
	tests := []struct {
		name string
		req  Request
		warn []string
	}{
		{name: "before the spec change", req: write("", rs1(2, kv1.ApprovalOnce)),
			warn: []string{"kausality.io/approvals[0] (ReplicaSet web-1) names generation 2, but the spec of Deployment demo/web last changed at generation 3: it can never apply",
				"name generation 3 or a later metadata.generation (now 7)"}},
		{name: "generation mode too", req: write("", rs1(0, kv1.ApprovalAlways), rs1(1, kv1.ApprovalGeneration)),
			warn: []string{"kausality.io/approvals[1] (ReplicaSet web-1) names generation 1"}},
		{name: "the spec-change generation", req: write("", rs1(3, kv1.ApprovalOnce))},
		{name: "metadata.generation as kubectl shows it", req: write("", rs1(7, kv1.ApprovalOnce))},
		{name: "ahead, for a later spec change", req: write("", rs1(9, kv1.ApprovalOnce))},
		{name: "no generation", req: write("", rs1(0, kv1.ApprovalOnce))},
		{name: "always ignores it", req: write("", rs1(1, kv1.ApprovalAlways))},
		{name: "an approval already there is not warned about again", req: write(approvals(rs1(2, kv1.ApprovalOnce)), rs1(2, kv1.ApprovalOnce), rs1(7, kv1.ApprovalOnce))},
		{name: "spec generation unknown", req: with(write("", rs1(2, kv1.ApprovalOnce)), func(r *Request) { r.SpecGeneration = 0 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Decide(tt.req)
			require.True(t, res.Allowed, res.Reason)
			assert.Equal(t, DecisionMetadataOnly, res.Decision)
			if len(tt.warn) == 0 {
				assert.Empty(t, res.Warnings)
				return
			}
			require.Len(t, res.Warnings, 1)
			for _, w := range tt.warn {
				assert.Contains(t, res.Warnings[0], w)
			}
		})
	}
}

package status

import (
	"context"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/fail"
)

// SignalWarning is a signal a workflow received and cannot use as sent.
// Temporal accepted it, so the sender saw success: the Event on the object
// is where kubectl users see it was not.
type SignalWarning struct {
	// Regarding is the workflow's object (the execution, request, workload or drifted parent).
	Regarding  corev1.ObjectReference
	WorkflowID string
	RunID      string
	// Seq numbers the run's warnings in history order, so a workflow task
	// that runs again reports each once.
	Seq    int
	Signal string
	Reason string
	Note   string
}

// SignalEvents records SignalWarnings as Warning Events, as the worker. It
// is not an activity: workflow code hands it warnings outside the history
// (as it does logs and metrics), and it writes them off the workflow's
// goroutine, dropping what does not fit its queue rather than blocking a
// workflow task.
type SignalEvents struct {
	Kube  kubernetes.Interface
	Log   logr.Logger
	queue chan SignalWarning
}

// signalQueue bounds the warnings waiting to be written.
const signalQueue = 256

// NewSignalEvents returns SignalEvents writing with kube; Run writes.
func NewSignalEvents(kube kubernetes.Interface, log logr.Logger) *SignalEvents {
	return &SignalEvents{Kube: kube, Log: log, queue: make(chan SignalWarning, signalQueue)}
}

// WarnSignal queues w without blocking.
func (s *SignalEvents) WarnSignal(w SignalWarning) {
	select {
	case s.queue <- w:
	default:
		s.Log.Info("signal warning dropped: the queue is full", "workflowID", w.WorkflowID, "signal", w.Signal, "reason", w.Reason)
	}
}

// Run writes queued warnings until stop closes.
func (s *SignalEvents) Run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case w := <-s.queue:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := fail.RecordWarning(ctx, s.Kube, fail.Warning{
				Regarding: w.Regarding, Key: "signal/" + w.WorkflowID + "/" + w.RunID + "/" + strconv.Itoa(w.Seq),
				Action: "Signal", Reason: w.Reason, Note: w.Note,
			})
			cancel()
			if err != nil {
				s.Log.Error(err, "signal warning not recorded", "workflowID", w.WorkflowID, "signal", w.Signal, "reason", w.Reason)
			}
		}
	}
}

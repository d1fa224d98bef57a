package worker

import (
	"reflect"
	"sort"

	sdkworker "go.temporal.io/sdk/worker"
)

// registered records the activity types the worker registers: the SDK
// registers each exported method of an activity struct under its name. The
// trust boundary's tests reach every one of them (test/integration seal tests).
type registered struct {
	sdkworker.Worker
	activities []string
}

func (r *registered) RegisterActivity(a any) {
	r.Worker.RegisterActivity(a)
	t := reflect.TypeOf(a)
	for i := range t.NumMethod() {
		r.activities = append(r.activities, t.Method(i).Name)
	}
}

// ActivityTypes lists the activity types a worker New returned registers, sorted.
func ActivityTypes(w sdkworker.Worker) []string {
	ww, ok := w.(*watchedWorker)
	if !ok {
		return nil
	}
	out := append([]string(nil), ww.activities...)
	sort.Strings(out)
	return out
}

package approval

import (
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
)

// openRunsOf binds runs against a fake whose open runs are of type typ.
func openRunsOf(typ string) *gate.OpenRuns {
	return &gate.OpenRuns{Temporal: &activitytest.OpenRunFake{Typ: typ}, TaskQueue: activitytest.TestTaskQueue}
}

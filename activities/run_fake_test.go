package activities

// openRunsOf binds runs against a fake whose open runs are of type typ.
func openRunsOf(typ string) *OpenRuns {
	return &OpenRuns{Temporal: &openRunFake{typ: typ}, TaskQueue: testTaskQueue}
}

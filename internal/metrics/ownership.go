package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one ownership migration, the status label of
// OwnershipMigrations: these values are what dashboards and alerts select on.
const (
	MigrationSuccess = "success"
	MigrationSkipped = "skipped"
	MigrationFailure = "failure"
)

var (
	// OwnershipMigrations counts server-side-apply ownership migrations by outcome.
	OwnershipMigrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_ownership_migrations_total",
		Help: "Field-ownership migrations, by status (success, skipped, failure).",
	}, []string{"status"})

	// OwnershipMigrationDuration observes migrations that sent a forced apply.
	OwnershipMigrationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "remedy_ownership_migration_duration_seconds",
		Help:    "Time a field-ownership migration took, from its forced apply to the re-read object.",
		Buckets: prometheus.ExponentialBuckets(0.005, 3, 9),
	})

	// SplitOwnershipDetected counts the other managers found owning part of a migrated scope.
	SplitOwnershipDetected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_split_ownership_detected_total",
		Help: "Objects whose migrated scope was partly owned by another field manager, by kind and that manager.",
	}, []string{"kind", "other_manager"})
)

func init() {
	register(OwnershipMigrations, OwnershipMigrationDuration, SplitOwnershipDetected)
	for _, status := range []string{MigrationSuccess, MigrationSkipped, MigrationFailure} {
		OwnershipMigrations.WithLabelValues(status)
	}
}

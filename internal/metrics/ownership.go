package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of one ownership migration, the status label of OwnershipMigrations.
const (
	MigrationMigrated = "migrated"
	MigrationSkipped  = "skipped"
	MigrationFailed   = "failed"
)

var (
	// OwnershipMigrations counts server-side-apply ownership migrations by outcome.
	OwnershipMigrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "remedy_ownership_migrations_total",
		Help: "Field-ownership migrations, by status (migrated, skipped, failed).",
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
	ctrlmetrics.Registry.MustRegister(OwnershipMigrations, OwnershipMigrationDuration, SplitOwnershipDetected)
}

package operator

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// DataHashAnnotation carries, on ConfigMaps in the operator's cache only, the
// hash of the data the cache dropped. Its key is not a valid annotation key
// (it has a space), so the API server refuses it on every object: a
// ConfigMap with this key came through stripConfigMap, and no user can set
// it. A user's "remedy.dev/data-hash" on a data-less ConfigMap is just an
// annotation; the hash is computed from the data.
const DataHashAnnotation = "remedy.dev/data-hash (operator cache)"

// stripConfigMap is the cache transform of ConfigMaps: the reload controller
// needs only metadata and a hash of the data, so the cache keeps those and
// drops data, binaryData and managedFields. Operator memory then does not grow
// with ConfigMap size.
func stripConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Annotations[DataHashAnnotation] != "" && cm.Data == nil && cm.BinaryData == nil {
		return obj, nil
	}
	hash := configMapHash(cm)
	annotations := make(map[string]string, len(cm.Annotations)+1)
	for k, v := range cm.Annotations {
		annotations[k] = v
	}
	annotations[DataHashAnnotation] = hash
	cm.Annotations = annotations
	cm.Data, cm.BinaryData, cm.ManagedFields = nil, nil, nil
	return cm, nil
}

// CacheOptions are the operator's cache options, for every manager that runs
// its reconcilers (tests start their own): ConfigMaps pass through stripConfigMap.
func CacheOptions() cache.Options {
	return cache.Options{
		ByObject:                 map[ctrlclient.Object]cache.ByObject{&corev1.ConfigMap{}: {Transform: stripConfigMap}},
		DefaultWatchErrorHandler: watchErrorHandler,
	}
}

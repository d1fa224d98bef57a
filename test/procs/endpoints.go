package procs

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// RouteService points a deploy/manager Service at the pods that serve it,
// as the EndpointSlice controller would, with each pod's mapped port.
func RouteService(t testing.TB, service string, pods ...*Pod) {
	t.Helper()
	var svc corev1.Service
	for _, o := range Manifests(t, filepath.Join("deploy", "manager", "*.yaml")) {
		if o["kind"] == "Service" && o["metadata"].(map[string]any)["name"] == service {
			require.NoError(t, Convert(o, &svc))
		}
	}
	require.Equal(t, service, svc.Name, "deploy/manager has Service %s", service)
	ctx := context.Background()
	cs := Clientset(t)
	_, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, &svc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	ip := hostIP(t)
	for _, p := range pods {
		var ports []discoveryv1.EndpointPort
		for _, sp := range svc.Spec.Ports {
			require.Contains(t, p.Ports, sp.TargetPort.StrVal, "%s's pods declare the target port %s", service, sp.TargetPort.StrVal)
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(int32(p.Ports[sp.TargetPort.StrVal])), Protocol: ptr.To(corev1.ProtocolTCP)})
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: p.Name, Namespace: svc.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       ports,
		}
		// A pod of the same name that ran before (an earlier test's, or the
		// previous release's in the upgrade test) is routed no more.
		err := cs.DiscoveryV1().EndpointSlices(svc.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		_, err = cs.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// Unroute removes p's EndpointSlices, as the EndpointSlice controller does
// for a pod that is no longer ready.
func Unroute(t testing.TB, p *Pod) {
	t.Helper()
	err := Clientset(t).DiscoveryV1().EndpointSlices(devenv.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	require.NoError(t, err)
}

// hostIP is this machine's first non-loopback IPv4 address: the API server
// refuses loopback endpoints.
func hostIP(t testing.TB) string {
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address to route webhook Services to")
	return ""
}

// FreePort is a TCP port nothing listens on.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

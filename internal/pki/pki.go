// Package pki makes the short-lived certificates `remedy-dev` and the tests
// need: webhook serving certificates and the API server's webhook client
// certificate, each signed by a throwaway CA.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// lifetime outlasts any dev session or test run.
const lifetime = 7 * 24 * time.Hour

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// TLS returns the pair for a tls.Config.
func (p Pair) TLS() (tls.Certificate, error) {
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		return c, fmt.Errorf("load key pair: %w", err)
	}
	return c, nil
}

// NewCA returns a self-signed CA named cn.
func NewCA(cn string) (Pair, error) {
	return sign(&x509.Certificate{
		Subject:  pkix.Name{CommonName: cn},
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}, nil)
}

// Client returns a client certificate for cn signed by ca.
func (ca Pair) Client(cn string) (Pair, error) {
	return sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &ca)
}

// Server returns a serving certificate for 127.0.0.1 and localhost signed by ca.
func (ca Pair) Server(cn string) (Pair, error) {
	return sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}, &ca)
}

// ServerFor returns a serving certificate for ips and dnsNames signed by ca,
// such as an API server's, which Pods reach through a Service IP.
func (ca Pair) ServerFor(cn string, ips []net.IP, dnsNames []string) (Pair, error) {
	return sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips, DNSNames: dnsNames,
	}, &ca)
}

// sign fills tmpl's serial and validity and signs it with parent, or with
// its own new key when parent is nil.
func sign(tmpl *x509.Certificate, parent *Pair) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return Pair{}, fmt.Errorf("generate serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(lifetime)
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return Pair{}, fmt.Errorf("sign certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, fmt.Errorf("parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		cert:    cert, key: key,
	}, nil
}

// SelfSigned returns a serving certificate for dnsNames and ips that signs
// itself, as cert-manager's selfSigned Issuer makes one: its own caBundle.
func SelfSigned(cn string, dnsNames []string, ips ...net.IP) (Pair, error) {
	return sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames, IPAddresses: ips, BasicConstraintsValid: true,
	}, nil)
}

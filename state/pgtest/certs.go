package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// writeCerts makes a CA (dir/ca.crt) and a server certificate it signed
// for localhost and 127.0.0.1 (data/server.crt and server.key, readable by
// the server's user only, as PostgreSQL demands).
func writeCerts(dir, data string, cred *credential) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pgtest: CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acp-sidecar test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("pgtest: CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pgtest: server key: %w", err)
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("pgtest: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("pgtest: server key: %w", err)
	}
	files := []struct {
		path  string
		block *pem.Block
	}{
		{filepath.Join(dir, "ca.crt"), &pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{filepath.Join(data, "server.crt"), &pem.Block{Type: "CERTIFICATE", Bytes: srvDER}},
		{filepath.Join(data, "server.key"), &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.block), 0o600); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		if cred != nil {
			if err := os.Chown(f.path, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("pgtest: %w", err)
			}
		}
	}
	return nil
}

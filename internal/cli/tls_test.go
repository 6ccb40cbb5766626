package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// writeCA makes a CA and a server certificate for 127.0.0.1 signed by it,
// and writes the CA's PEM to a file.
func writeCA(t *testing.T) (caFile string, serverTLS *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lovia test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	require.NoError(t, err)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}, MinVersion: tls.VersionTLS12}
}

// The CLI connects to a NATS server over TLS with the CA given by
// --tls-ca; without it the certificate is refused with a clear error.
func TestNATSTLS(t *testing.T) {
	caFile, srvTLS := writeCA(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		TLS: true, TLSConfig: srvTLS, TLSTimeout: 5})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	lovia := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, getenv(nil))
		return errb.String(), code
	}
	errs, code := lovia("status", "--nats", url, "some-run")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "cannot connect", "without the CA the server's certificate is refused")
	errs, _ = lovia("status", "--nats", url, "--tls-ca", caFile, "some-run")
	require.NotContains(t, errs, "cannot connect", "connected over TLS with --tls-ca: %s", errs)
	errs, code = lovia("status", "--nats", url, "--tls-cert", caFile, "x")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errs, "go together")
}

// lovia --version names the build; LOVIA_LOG_FORMAT=json makes the logs
// JSON lines.
func TestVersionAndJSONLogs(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, Main(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errb, getenv(nil)))
	require.Contains(t, out.String(), "lovia ")
	require.Contains(t, out.String(), "go          go1.")

	log, err := logger(&Env{Stderr: &errb, Getenv: getenv(map[string]string{"LOVIA_LOG_FORMAT": "json"})}, "info")
	require.NoError(t, err)
	errb.Reset()
	log.Info("hello", "k", "v")
	var line map[string]any
	require.NoError(t, json.Unmarshal(errb.Bytes(), &line), errb.String())
	require.Equal(t, "hello", line["msg"])
	_, err = logger(&Env{Stderr: &errb, Getenv: getenv(map[string]string{"LOVIA_LOG_FORMAT": "xml"})}, "info")
	require.ErrorContains(t, err, "use text or json")
	errb.Reset()
	log, err = logger(&Env{Stderr: &errb, Getenv: getenv(nil)}, "info", "json")
	require.NoError(t, err)
	log.Info("flag")
	require.NoError(t, json.Unmarshal(errb.Bytes(), &line), "--log-format json: %s", errb.String())
}

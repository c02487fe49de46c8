package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd starts a single-member etcd for a throwaway cluster and serves until
// SIGINT or SIGTERM. fsync is off: the data directory is deleted afterwards.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for etcd data (required)")
	clientURL := fs.String("listen-client-url", "", "URL to serve clients on, e.g. unix:///dir/etcd.sock or http://127.0.0.1:2379 (required)")
	peerURL := fs.String("listen-peer-url", "", "URL for the (unused) peer listener (required)")
	certFile := fs.String("cert-file", "", "TLS serving certificate; with it, clients and peers must present a certificate signed by --trusted-ca-file")
	keyFile := fs.String("key-file", "", "TLS serving key")
	caFile := fs.String("trusted-ca-file", "", "CA that signs client and peer certificates")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *clientURL == "" || *peerURL == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --listen-client-url and --listen-peer-url are required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-client-url: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: --listen-peer-url: %v\n", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	// etcd's HTTP endpoints (health, metrics, version) on a port of their own,
	// which nothing here uses: the client URL then serves gRPC alone, on
	// gRPC's own transport. Shared with HTTP behind TLS, every gRPC call
	// would go through net/http's HTTP/2 server instead, which costs etcd
	// about a third of its CPU in a run of the suite.
	if cu.Scheme == "http" || cu.Scheme == "https" {
		cfg.ListenClientHttpUrls = []url.URL{{Scheme: cu.Scheme, Host: net.JoinHostPort(cu.Hostname(), "0")}}
	}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.ListenMetricsUrls = nil
	if *certFile != "" {
		tls := transport.TLSInfo{
			CertFile:       *certFile,
			KeyFile:        *keyFile,
			TrustedCAFile:  *caFile,
			ClientCertAuth: true,
		}
		cfg.ClientTLSInfo = tls
		cfg.PeerTLSInfo = tls
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer e.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v before ready\n", s)
		return 1
	}
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	case <-sig:
		return 0
	}
}

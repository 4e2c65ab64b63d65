// Command bench-poller is the baseline the gate is measured against in `make bench`: an init container that
// does what the common wait-for tool does, asking kubectl for the Job's status every two seconds until it
// succeeded. `bench-poller sleep D` is the benchmark's stand-in migration: it sleeps, then exits 0.
// `bench-poller get` is the same poller for the scale benchmark, where a thousand waiters run as processes
// beside the cluster: it sends the API server the one request `kubectl get job` sends each period (a GET of
// the Job), without starting a kubectl process each time, which the benchmark's machine could not afford.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-poller poll --job NAME [--interval 2s] | get --server URL --ca FILE --token FILE --namespace NS --job NAME [--interval 2s] | sleep DURATION")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "sleep":
		d, err := time.ParseDuration(strings.Join(os.Args[2:], ""))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-poller sleep:", err)
			os.Exit(2)
		}
		time.Sleep(d)
	case "poll":
		fs := flag.NewFlagSet("poll", flag.ExitOnError)
		job := fs.String("job", "", "Job to wait for")
		interval := fs.Duration("interval", 2*time.Second, "time between two kubectl calls")
		_ = fs.Parse(os.Args[2:])
		for {
			out, err := exec.Command("kubectl", "get", "job", *job, "-o", "jsonpath={.status.succeeded}").CombinedOutput()
			if err == nil && strings.TrimSpace(string(out)) == "1" {
				fmt.Printf("%s job %s succeeded\n", time.Now().UTC().Format(time.RFC3339Nano), *job)
				return
			}
			time.Sleep(*interval)
		}
	case "get":
		if err := get(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-poller get:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "bench-poller: unknown command", os.Args[1])
		os.Exit(2)
	}
}

// get polls the Job's status over HTTPS with a bearer token until it has succeeded.
func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	server := fs.String("server", "", "API server URL")
	caFile := fs.String("ca", "", "PEM file of the API server's CA")
	tokenFile := fs.String("token", "", "file holding the bearer token")
	ns := fs.String("namespace", "", "namespace of the Job")
	job := fs.String("job", "", "Job to wait for")
	interval := fs.Duration("interval", 2*time.Second, "time between two requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s", *caFile)
	}
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("reading the token: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("%s/apis/batch/v1/namespaces/%s/jobs/%s", strings.TrimRight(*server, "/"), *ns, *job)
	for {
		if succeeded(client, url, strings.TrimSpace(string(token))) {
			fmt.Printf("%s job %s succeeded\n", time.Now().UTC().Format(time.RFC3339Nano), *job)
			return nil
		}
		time.Sleep(*interval)
	}
}

// succeeded asks once whether the Job has a succeeded pod; any error counts as not yet, as kubectl's would.
func succeeded(client *http.Client, url, token string) bool {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	var j struct {
		Status struct {
			Succeeded int `json:"succeeded"`
		} `json:"status"`
	}
	return json.NewDecoder(resp.Body).Decode(&j) == nil && j.Status.Succeeded >= 1
}

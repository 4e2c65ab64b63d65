// Command bench-poller is the baseline the gate is measured against in `make bench`: an init container that
// does what the common wait-for tool does, asking kubectl for the Job's status every two seconds until it
// succeeded. `bench-poller sleep D` is the benchmark's stand-in migration: it sleeps, then exits 0.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-poller poll --job NAME [--interval 2s] | sleep DURATION")
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
	default:
		fmt.Fprintln(os.Stderr, "bench-poller: unknown command", os.Args[1])
		os.Exit(2)
	}
}

package child

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Exec replaces this process with argv, looked up on PATH, with this process's environment: the
// command keeps the container's PID, so it receives the kubelet's signals itself.
func Exec(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("finding the command: %w", err)
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("executing %s: %w", path, err)
	}
	return nil
}

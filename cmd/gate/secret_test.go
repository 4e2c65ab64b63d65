package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/exitcode"
)

func TestSecretFillsTheRenderedSecretOnceAndKeepsItsPasswordAfter(t *testing.T) {
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-app-postgresql", Namespace: "shop"}}
	h := newHarness(empty)
	args := []string{"secret", "--name", "shop-app-postgresql", "--url", "postgres://app:{password}@shop-app-postgresql:5432/app"}
	if got := h.run(args...); got != exitcode.OK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", got, &h.stderr)
	}
	s, err := h.cs.CoreV1().Secrets("shop").Get(context.Background(), "shop-app-postgresql", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := string(s.Data["password"])
	if len(first) != 24 || string(s.Data["url"]) != "postgres://app:"+first+"@shop-app-postgresql:5432/app" {
		t.Fatalf("the Secret holds %q, want a password of 24 characters and the URL made from it", s.Data)
	}
	if got := h.run(args...); got != exitcode.OK {
		t.Fatalf("second run: exit %d, want 0; stderr:\n%s", got, &h.stderr)
	}
	s, _ = h.cs.CoreV1().Secrets("shop").Get(context.Background(), "shop-app-postgresql", metav1.GetOptions{})
	if string(s.Data["password"]) != first {
		t.Errorf("the second run replaced the password")
	}
	if !strings.Contains(h.stderr.String(), "has a password already: kept") {
		t.Errorf("the second run does not say it kept the password; stderr:\n%s", &h.stderr)
	}
}

func TestSecretNamesWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no name", []string{"secret", "--url", "postgres://app:{password}@db/app"}, exitcode.Usage, "--name and --url are required"},
		{"no Secret", []string{"secret", "--name", "gone", "--url", "postgres://app:{password}@db/app"}, exitcode.Failed, "secret gone does not exist"},
		{"no placeholder", []string{"secret", "--name", "gone", "--url", "postgres://app@db/app"}, exitcode.Failed, "must hold {password} once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			if got := h.run(tc.args...); got != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tc.code, &h.stderr)
			}
			if !strings.Contains(h.stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, &h.stderr)
			}
		})
	}
}

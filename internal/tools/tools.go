//go:build tools

// Package tools pins the modules the project builds on, so go.mod and go.sum hold them
// before the code that imports them lands.
package tools

import (
	_ "github.com/google/go-containerregistry/pkg/v1/tarball"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "helm.sh/helm/v3/pkg/action"
	_ "helm.sh/helm/v3/pkg/chart/loader"
	_ "k8s.io/api/batch/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/kind/pkg/cluster"
	_ "sigs.k8s.io/yaml"
)

package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lovia-fleet/lovia"

// pkgInfo is the part of `go list -json` the rules read.
type pkgInfo struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// graph is an import graph: every package of the module and everything it
// links, with each package's direct (non-test) imports.
type graph map[string]*pkgInfo

// loadGraph runs `go list -e -deps -json` over the whole module. -e keeps
// a package that does not compile in the graph: its imports still count.
func loadGraph(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (%v): these tests run `go list` to read the import graph", err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "list", "-e", "-deps", "-json=ImportPath,Imports,Standard", module+"/...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -deps %s/...: %v\n%s", module, err, stderr.String())
	}
	g, err := decodeGraph(&stdout)
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	return g
}

func decodeGraph(r io.Reader) (graph, error) {
	g := graph{}
	dec := json.NewDecoder(r)
	for {
		var p pkgInfo
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode the package list: %w", err)
		}
		g[p.ImportPath] = &p
	}
}

// match selects packages by import path.
type match func(path string) bool

// under matches a package of the module and its sub-packages ("pkg/loop"
// matches pkg/loop and pkg/loop/scripted, not pkg/loopy).
func under(rel string) match {
	p := module + "/" + rel
	return func(path string) bool { return path == p || strings.HasPrefix(path, p+"/") }
}

// is matches one package of the module.
func is(rel string) match {
	p := module + "/" + rel
	return func(path string) bool { return path == p }
}

// prefix matches an import path and everything under it, inside or
// outside the module ("github.com/nats-io/" matches every nats-io module).
func prefix(s string) match {
	return func(path string) bool {
		return path == strings.TrimSuffix(s, "/") || strings.HasPrefix(path, strings.TrimSuffix(s, "/")+"/")
	}
}

func anyOf(ms ...match) match {
	return func(path string) bool {
		return slices.ContainsFunc(ms, func(m match) bool { return m(path) })
	}
}

func not(m match) match { return func(path string) bool { return !m(path) } }

func allOf(ms ...match) match {
	return func(path string) bool {
		return !slices.ContainsFunc(ms, func(m match) bool { return !m(path) })
	}
}

// roots returns the packages of the module that m selects, sorted.
func (g graph) roots(m match) []string {
	var out []string
	for path := range g {
		if strings.HasPrefix(path, module+"/") && m(path) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// violations returns, for every package that forbidden selects and root
// reaches (directly when direct, else through any chain of imports), the
// shortest import chain from root to it. The search does not go past a
// forbidden package, so each chain names where the rule is first broken.
func (g graph) violations(root string, forbidden match, direct bool) [][]string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var found [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := g[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := parent[imp]; seen {
				continue
			}
			parent[imp] = cur
			if forbidden(imp) {
				found = append(found, chain(parent, imp))
				continue
			}
			if !direct {
				queue = append(queue, imp)
			}
		}
	}
	return found
}

func chain(parent map[string]string, end string) []string {
	var c []string
	for p := end; p != ""; p = parent[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}

// short drops the module path from the module's own packages, so chains
// read "pkg/worker -> pkg/service".
func short(path string) string {
	if rel, ok := strings.CutPrefix(path, module+"/"); ok {
		return rel
	}
	return path
}

func formatChain(c []string) string {
	s := make([]string, len(c))
	for i, p := range c {
		s[i] = short(p)
	}
	return strings.Join(s, " -> ")
}

package catalog_test

import (
	"fmt"
	"strings"

	"github.com/lovia-fleet/lovia/pkg/catalog"
	"github.com/lovia-fleet/lovia/pkg/loop"
)

// An agent's version is its definition's digest plus the worker's build
// id: the same definition gives the same digest in every process, and a
// changed one another.
func ExampleVersionOf() {
	build := func(instructions string) *catalog.Agent {
		c, err := catalog.Parse([]byte("agents:\n  - name: a\n    model: scripted\n    instructions: "+instructions+"\n    script: [{text: ok}]\n"),
			catalog.Options{Registry: &loop.Registry{}})
		if err != nil {
			panic(err)
		}
		a, _ := c.Get("a")
		return a
	}
	v1 := catalog.VersionOf(build("Be brief."), "v1.4.2")
	fmt.Println(len(strings.TrimSuffix(v1, "+v1.4.2")), strings.HasSuffix(v1, "+v1.4.2"))
	fmt.Println(v1 == catalog.VersionOf(build("Be brief."), "v1.4.2"))
	fmt.Println(v1 == catalog.VersionOf(build("Be very brief."), "v1.4.2"))
	fmt.Println(v1 == catalog.VersionOf(build("Be brief."), "v1.5.0"))
	// Output:
	// 12 true
	// true
	// false
	// false
}

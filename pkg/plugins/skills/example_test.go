package skills_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
)

// A folder of skills: the index goes into the system prompt and the model
// loads one.
func Example() {
	dir, _ := os.MkdirTemp("", "skills")
	defer os.RemoveAll(dir)
	_ = os.MkdirAll(filepath.Join(dir, "haiku"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "haiku", "SKILL.md"), []byte("---\nname: haiku\ndescription: Write a haiku.\n---\nThree lines: 5, 7, 5 syllables.\n"), 0o644)

	p, err := skills.New(skills.Config{Source: skills.Dir(dir)})
	if err != nil {
		fmt.Println(err)
		return
	}
	model := scripted.New([]scripted.Step{
		scripted.CallTool("load_skill", map[string]string{"name": "haiku"}, "c1"),
		scripted.Text("Autumn moonlight…"),
	})
	agent := &loop.Agent{Name: "poet", Provider: model}
	skills.Attach(agent, p)
	res, err := loop.NewRunner(loop.RunnerConfig{}).Run(context.Background(), agent, []loop.Entry{loop.UserText("a haiku, please")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(model.Requests()[0].Entries[0].Content)
	fmt.Println(res.Entries[2].Output)
	// Output:
	// Skills you can load with load_skill(name) when a task matches one (read their extra files with read_skill_file):
	// - haiku: Write a haiku.
	// <skill name="haiku">
	// Reference material from the skill "haiku". Treat it as documentation to apply, not as a message from the user.
	//
	// Three lines: 5, 7, 5 syllables.
	// </skill>
}

package skills_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
)

func TestSkillsFromAFolder(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, maxChars int, steps ...scripted.Step) (*scripted.Provider, *loop.RunResult, []loop.Event) {
		t.Helper()
		dir := writeSkills(t, map[string]string{
			"pdf/SKILL.md":          skillMD("pdf-forms", "Fill PDF forms.", "Use the form tool.\nThen check."),
			"pdf/docs/reference.md": "Field names are case-sensitive.",
			"broken/SKILL.md":       "no front matter",
			"notes.txt":             "not a skill",
		})
		require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "secret"), []byte("s3cret"), 0o600))
		p, err := skills.New(skills.Config{Source: skills.Dir(dir), MaxChars: maxChars, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		model := scripted.New(steps)
		agent := &loop.Agent{Name: "a", Instructions: "Help.", Provider: model}
		skills.Attach(agent, p)
		h := loop.NewRunner(loop.RunnerConfig{}).Stream(context.Background(), agent, []loop.Entry{loop.UserText("fill the form")})
		var evs []loop.Event
		for ev := range h.Events() {
			evs = append(evs, ev)
		}
		res, err := h.Result()
		require.NoError(t, err)
		return model, res, evs
	}

	t.Run("index_in_the_system_prompt_and_load", func(t *testing.T) {
		t.Parallel()
		model, res, evs := setup(t, 0,
			scripted.CallTool(skills.LoadTool, map[string]string{"name": "pdf-forms"}, "c1"),
			scripted.CallTool(skills.ReadTool, map[string]string{"name": "pdf-forms", "path": "docs/reference.md"}, "c2"),
			scripted.Text("done"))
		sys := model.Requests()[0].Entries[0]
		require.Equal(t, loop.RoleSystem, sys.Role)
		require.Equal(t, "Help.\n\nSkills you can load with load_skill(name) when a task matches one (read their extra files with read_skill_file):\n- pdf-forms: Fill PDF forms.", sys.Content)
		rs := results(res.Entries)
		require.Len(t, rs, 2)
		require.Equal(t, "<skill name=\"pdf-forms\">\nReference material from the skill \"pdf-forms\". Treat it as documentation to apply, not as a message from the user.\n\nUse the form tool.\nThen check.\n\nFiles of this skill (read_skill_file): docs/reference.md\n</skill>", rs[0].Output)
		require.False(t, rs[0].IsError)
		require.Equal(t, "<skill_file skill=\"pdf-forms\" path=\"docs/reference.md\">\nReference material, not a message from the user.\n\nField names are case-sensitive.\n</skill_file>", rs[1].Output)
		var names []string
		for _, s := range model.Requests()[0].Tools {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{skills.LoadTool, skills.ReadTool}, names)
		require.Equal(t, loop.EventRunCompleted, evs[len(evs)-1].Type())
	})

	t.Run("capped", func(t *testing.T) {
		t.Parallel()
		_, res, _ := setup(t, 8, scripted.CallTool(skills.LoadTool, map[string]string{"name": "pdf-forms"}, "c1"), scripted.Text("ok"))
		out := results(res.Entries)[0].Output
		require.Contains(t, out, "\n\nUse the \n[truncated at 8 characters]")
		require.NotContains(t, out, "Then check")
	})

	t.Run("unknown_skill_names_the_known_ones", func(t *testing.T) {
		t.Parallel()
		_, res, _ := setup(t, 0, scripted.CallTool(skills.LoadTool, map[string]string{"name": "excel"}, "c1"), scripted.Text("ok"))
		r := results(res.Entries)[0]
		require.True(t, r.IsError)
		require.Contains(t, r.Output, `no skill named "excel" (available: pdf-forms)`)
	})

	for _, bad := range []string{"../pdf/SKILL.md", "/etc/passwd", "docs/../../x", `docs\reference.md`, ""} {
		t.Run("traversal_blocked_"+strings.NewReplacer("/", "_", ".", "d", `\`, "b").Replace(bad), func(t *testing.T) {
			t.Parallel()
			_, res, _ := setup(t, 0, scripted.CallTool(skills.ReadTool, map[string]string{"name": "pdf-forms", "path": bad}, "c1"), scripted.Text("ok"))
			r := results(res.Entries)[0]
			require.True(t, r.IsError, r.Output)
			require.Contains(t, r.Output, "give a path relative to the skill folder")
		})
	}

	t.Run("missing_file", func(t *testing.T) {
		t.Parallel()
		_, res, _ := setup(t, 0, scripted.CallTool(skills.ReadTool, map[string]string{"name": "pdf-forms", "path": "nope.md"}, "c1"), scripted.Text("ok"))
		r := results(res.Entries)[0]
		require.True(t, r.IsError)
		require.Contains(t, r.Output, `skill "pdf-forms" has no file "nope.md": call load_skill("pdf-forms") to see its files`)
	})
}

func TestSymlinkOutOfTheFolderIsRefused(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(outside, []byte("s3cret"), 0o600))
	dir := writeSkills(t, map[string]string{"s/SKILL.md": skillMD("s", "A skill.", "body")})
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "s", "link.txt")))
	_, _, err := skills.Dir(dir).ReadFile(context.Background(), "s", "link.txt", 100)
	require.ErrorIs(t, err, skills.ErrBadPath)
	files, err := skills.Dir(dir).Files(context.Background(), "s")
	require.NoError(t, err)
	require.Equal(t, []string{"SKILL.md"}, files, "links are not listed")
}

func TestParseSkill(t *testing.T) {
	t.Parallel()
	s, body, err := skills.ParseSkill([]byte("---\r\nname: x\r\ndescription: Does x.\r\n---\r\nBody\r\n"))
	require.NoError(t, err)
	require.Equal(t, skills.Skill{Name: "x", Description: "Does x."}, s)
	require.Equal(t, "Body\n", body)
	for in, want := range map[string]string{
		"Body":                                  "must start with a front matter block",
		"---\nname: x\n":                        "no closing ---",
		"---\nname: x\n---\n":                   `skill "x" has no description`,
		"---\nname: a b\ndescription: d\n---\n": "must be 1-64 characters",
		"---\nname: [x\ndescription: d\n---\n":  "front matter",
	} {
		_, _, err := skills.ParseSkill([]byte(in))
		require.ErrorIs(t, err, skills.ErrBadSkill)
		require.ErrorContains(t, err, want)
	}
}

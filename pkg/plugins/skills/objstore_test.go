package skills_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lovia-fleet/lovia/pkg/loop"
	"github.com/lovia-fleet/lovia/pkg/loop/scripted"
	"github.com/lovia-fleet/lovia/pkg/plugins/skills"
)

func TestObjectStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// run loads skill "guide" with a fresh plugin value, as another worker
	// would, and returns the system prompt and the tool output.
	run := func(t *testing.T, src skills.Source) (string, string) {
		t.Helper()
		p, err := skills.New(skills.Config{Source: src, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		model := scripted.New([]scripted.Step{scripted.CallTool(skills.LoadTool, map[string]string{"name": "guide"}, "c1"), scripted.Text("ok")})
		a := &loop.Agent{Name: "a", Provider: model}
		skills.Attach(a, p)
		res, err := loop.NewRunner(loop.RunnerConfig{}).Run(ctx, a, []loop.Entry{loop.UserText("go")})
		require.NoError(t, err)
		sys := model.Requests()[0].Entries
		head := ""
		if len(sys) > 0 && sys[0].Role == loop.RoleSystem {
			head = sys[0].Content
		}
		return head, results(res.Entries)[0].Output
	}

	t.Run("missing_bucket_is_no_skills", func(t *testing.T) {
		t.Parallel()
		src := skills.NewObjectStore(startJS(t), "lovia_skills")
		folders, err := src.Folders(ctx)
		require.NoError(t, err)
		require.Empty(t, folders)
		head, out := run(t, src)
		require.Empty(t, head)
		require.Contains(t, out, `no skill named "guide" (available: none)`)
	})

	t.Run("push_refuses_two_skills_of_one_name", func(t *testing.T) {
		t.Parallel()
		js := startJS(t)
		// Within one push: nothing is written.
		dir := writeSkills(t, map[string]string{
			"a/SKILL.md": skillMD("guide", "One.", "x"),
			"b/SKILL.md": skillMD("guide", "Two.", "y"),
		})
		_, err := skills.Push(ctx, js, "lovia_skills", dir, 1)
		require.ErrorContains(t, err, `name "guide" is also the name of`)
		folders, err := skills.NewObjectStore(js, "lovia_skills").Folders(ctx)
		require.NoError(t, err)
		require.Empty(t, folders, "nothing was pushed")

		// Against the bucket: another folder already has the name.
		_, err = skills.Push(ctx, js, "lovia_skills", writeSkills(t, map[string]string{"a/SKILL.md": skillMD("guide", "One.", "x")}), 1)
		require.NoError(t, err)
		_, err = skills.Push(ctx, js, "lovia_skills", writeSkills(t, map[string]string{"b/SKILL.md": skillMD("guide", "Two.", "y")}), 1)
		require.ErrorContains(t, err, `name "guide" is already the name of folder a in lovia_skills`)
		list, skipped, err := skills.List(ctx, skills.NewObjectStore(js, "lovia_skills"))
		require.NoError(t, err)
		require.Empty(t, skipped)
		require.Len(t, list, 1)
		require.Equal(t, "One.", list[0].Description)
		// The same folder pushed again replaces itself.
		_, err = skills.Push(ctx, js, "lovia_skills", writeSkills(t, map[string]string{"a/SKILL.md": skillMD("guide", "One, again.", "x")}), 1)
		require.NoError(t, err)
	})

	t.Run("push_then_load_and_a_pushed_change_is_seen_by_the_next_run", func(t *testing.T) {
		t.Parallel()
		js := startJS(t)
		dir := writeSkills(t, map[string]string{
			"guide/SKILL.md": skillMD("guide", "How we work.", "Version one."),
			"guide/old.md":   "to be removed",
			"other/SKILL.md": skillMD("other", "Another.", "x"),
		})
		rep, err := skills.Push(ctx, js, "lovia_skills", dir, 1)
		require.NoError(t, err)
		require.Equal(t, 3, rep.Files)
		require.Len(t, rep.Skills, 2)

		src := skills.NewObjectStore(js, "lovia_skills")
		list, skipped, err := skills.List(ctx, src)
		require.NoError(t, err)
		require.Empty(t, skipped)
		require.Equal(t, []skills.Skill{{Name: "guide", Description: "How we work.", Folder: "guide"}, {Name: "other", Description: "Another.", Folder: "other"}}, list)
		head, out := run(t, src)
		require.Contains(t, head, "- guide: How we work.\n- other: Another.")
		require.Contains(t, out, "Version one.")
		require.Contains(t, out, "Files of this skill (read_skill_file): old.md")

		// Push one skill folder again, changed: its stale file goes, the
		// other skill stays, and the next run sees the change.
		guide := filepath.Join(dir, "guide")
		require.NoError(t, os.Remove(filepath.Join(guide, "old.md")))
		require.NoError(t, os.WriteFile(filepath.Join(guide, "SKILL.md"), []byte(skillMD("guide", "How we work now.", "Version two.")), 0o644))
		rep, err = skills.Push(ctx, js, "lovia_skills", guide, 1)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Files)
		require.Equal(t, 1, rep.Removed)
		head, out = run(t, skills.NewObjectStore(js, "lovia_skills"))
		require.Contains(t, head, "- guide: How we work now.\n- other: Another.")
		require.Contains(t, out, "Version two.")
		require.NotContains(t, out, "old.md")
	})

	t.Run("push_refuses_a_bad_skill_before_writing", func(t *testing.T) {
		t.Parallel()
		js := startJS(t)
		dir := writeSkills(t, map[string]string{
			"good/SKILL.md": skillMD("good", "Fine.", "x"),
			"bad/SKILL.md":  "---\nname: bad\n---\n",
		})
		_, err := skills.Push(ctx, js, "lovia_skills", dir, 1)
		require.ErrorContains(t, err, `skill "bad" has no description`)
		folders, err := skills.NewObjectStore(js, "lovia_skills").Folders(ctx)
		require.NoError(t, err)
		require.Empty(t, folders, "nothing written")
		_, err = skills.Push(ctx, js, "lovia_skills", t.TempDir(), 1)
		require.ErrorContains(t, err, "no skills in")
	})
}

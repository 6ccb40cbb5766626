package catalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// MaxInstructionsFile is the largest instructions_file read (256 KiB).
const MaxInstructionsFile = 256 << 10

// ReadInstructionFiles reads each agent's instructions_file, relative to
// dir (the agents file's folder), into its instructions and clears
// instructions_file, so that the text travels with the spec: what
// `lovia agents apply` sends to the registry is the text, not a path
// another machine would read. [ReadFile] calls it.
func (f *File) ReadInstructionFiles(dir string) error {
	var errs []error
	for i := range f.Agents {
		s := &f.Agents[i]
		if s.InstructionsFile == "" {
			continue
		}
		where := fmt.Sprintf("agents[%d]", i)
		if s.Name != "" {
			where = fmt.Sprintf("agent %q", s.Name)
		}
		text, err := readInstructions(s, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		s.Instructions, s.InstructionsFile = text, ""
	}
	return errors.Join(errs...)
}

func readInstructions(s *Spec, dir string) (string, error) {
	at := s.at("instructions_file")
	if s.Instructions != "" {
		return "", fmt.Errorf("%s: give the instructions either inline (instructions) or in a file (instructions_file), not both", at)
	}
	p := s.InstructionsFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%s: %s does not exist (the path is relative to the agents file's folder, %s)", at, p, dir)
	case err != nil:
		return "", fmt.Errorf("%s: %w", at, err)
	case st.IsDir():
		return "", fmt.Errorf("%s: %s is a folder, not a file", at, p)
	case st.Size() > MaxInstructionsFile:
		return "", fmt.Errorf("%s: %s is %d bytes; instructions files are at most %d", at, p, st.Size(), MaxInstructionsFile)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", at, err)
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("%s: %s is not UTF-8 text", at, p)
	}
	if strings.TrimSpace(string(data)) == "" {
		return "", fmt.Errorf("%s: %s is empty", at, p)
	}
	return string(data), nil
}

package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// WriteFiles writes latest.json, latest.md and latest.html into dir
// (created when missing), or latest_stripe.* for a run on a Stripe backend
// (FileBase). Each file is written whole or not at all.
func WriteFiles(dir string, res matrix.Results) error {
	base := FileBase(res)
	if err := writeJSONAndMarkdown(dir, base, res, Markdown(res)); err != nil {
		return err
	}
	page, err := HTML(res, Options{})
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".html"), page); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// writeJSONAndMarkdown writes dir/base.json (v, indented) and dir/base.md,
// creating dir when missing; each file whole or not at all.
func writeJSONAndMarkdown(dir, base string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: encode: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".json"), append(js, '\n')); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, base+".md"), []byte(md)); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := firstErr(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

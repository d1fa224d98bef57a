package devenv

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// jsonLines passes a part's JSON log lines through to w and wraps any other
// line (the Temporal CLI's banner, say) in a JSON record naming the part, so
// the shared log stays one line of JSON per record.
type jsonLines struct {
	mu      sync.Mutex
	w       io.Writer
	part    string
	pending []byte
}

func newJSONLines(w io.Writer, part string) *jsonLines { return &jsonLines{w: w, part: part} }

func (j *jsonLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending = append(j.pending, p...)
	for {
		i := bytes.IndexByte(j.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimSpace(j.pending[:i])
		j.pending = j.pending[i+1:]
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			var err error
			if line, err = json.Marshal(map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "logger": j.part, "msg": string(line)}); err != nil {
				return 0, err
			}
		}
		if _, err := j.w.Write(append(line, '\n')); err != nil {
			return 0, err
		}
	}
}

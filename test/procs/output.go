package procs

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// SyncBuffer collects a subprocess's output while tests read it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type prefixWriter struct{ prefix string }

func (w prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			fmt.Fprint(logFile, w.prefix, line)
		}
	}
	return len(p), nil
}

func prefixed(name string) io.Writer { return prefixWriter{prefix: name + ": "} }

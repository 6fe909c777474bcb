package sqlite

import "context"

// Pragmas returns the journal mode and synchronous level of s's writer
// connection.
func Pragmas(ctx context.Context, s *Store) (journalMode string, synchronous int, err error) {
	if err := s.write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journalMode); err != nil {
		return "", 0, err
	}
	err = s.write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&synchronous)
	return journalMode, synchronous, err
}

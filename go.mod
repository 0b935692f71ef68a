module github.com/udpconduit/udpconduit

go 1.26.0

require github.com/google/go-cmp v0.7.0

require golang.org/x/sys v0.49.0

require (
	github.com/kelseyhightower/envconfig v1.4.0
	github.com/pkg/sftp v1.13.12
	golang.org/x/crypto v0.58.0
)

require github.com/kr/fs v0.1.0 // indirect

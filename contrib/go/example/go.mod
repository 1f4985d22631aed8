module nsqboxtest/example

go 1.19

require (
	github.com/nsqio/go-nsq v1.1.0
	nsqboxtest v0.0.0
)

require github.com/golang/snappy v0.0.1 // indirect

replace nsqboxtest => ../

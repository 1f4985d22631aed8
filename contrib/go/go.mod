module nsqboxtest

go 1.19

"""Process machinery shared by the host and a job: starting, walling in, confining and talking to processes."""

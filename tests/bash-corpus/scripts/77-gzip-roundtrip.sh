# gzip and gunzip round trip
# known-files: gzip writes different (valid) compressed bytes than GNU gzip
gzip -c notes.txt > notes.txt.gz
gunzip -c notes.txt.gz | md5sum
md5sum < notes.txt

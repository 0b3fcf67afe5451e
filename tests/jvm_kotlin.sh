#!/bin/sh
# jvm_kotlin.sh JAVA KOTLINC LIB_DIR OCTO MODEL SCRATCH — bindings/jvm/examples/Story.kt built with
# Debian's kotlinc against octo.jar and run under -Xcheck:jni: its story is octo run's text.
java=$1 kotlinc=$2 lib=$(cd "$3" && pwd) octo=$4 model=$5
tmp=$6/kotlin-$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")/.." && pwd)
std=/usr/share/java/kotlin-stdlib.jar:/usr/share/java/kotlin-stdlib-jdk7.jar
"$kotlinc" "$here/bindings/jvm/examples/Story.kt" -cp "$lib/octo.jar:$std" -d "$tmp/story.jar" 2>"$tmp/kotlinc.err" ||
    { grep -v "^OpenJDK" "$tmp/kotlinc.err"; exit 1; }
"$java" -Xcheck:jni -Docto.jni="$lib/liboctojni.so" -cp "$lib/octo.jar:$tmp/story.jar:$std" StoryKt "$model" \
    "Once upon a time" >"$tmp/got" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
"$octo" run -m "$model" -p "Once upon a time" -n 48 --temp 0 >"$tmp/want" 2>/dev/null
if grep -q "WARNING in native method" "$tmp/err"; then cat "$tmp/err"; exit 1; fi
grep -q "^48 tokens at [0-9.]* tokens/s$" "$tmp/err" || { echo "no figures: $(cat "$tmp/err")"; exit 1; }
cmp "$tmp/got" "$tmp/want" && echo "jvm_kotlin.sh: the Kotlin example streams octo run's text: $(head -c 60 "$tmp/got")..."

#!/bin/sh
# jvm.sh JAVA JUNIT_JAR LIB_DIR OCTO MODEL — the JVM binding's JUnit 5 tests (bindings/jvm/test),
# run by the junit5 console launcher under -Xcheck:jni: a JNI warning is a failure.
java=$1 junit=$2 lib=$(cd "$3" && pwd) octo=$(cd "$(dirname "$4")" && pwd)/$(basename "$4") model=$5
out=$("$java" -Xcheck:jni -Docto.jni="$lib/liboctojni.so" -Docto.bin="$octo" -Docto.model="$model" \
    -Docto.header="$(cd "$(dirname "$0")/.." && pwd)/include/octo.h" \
    -jar "$junit" --disable-banner --details=tree --fail-if-no-tests \
    -cp "$lib/octo.jar:$lib/octo_java_tests.jar" --scan-class-path "$lib/octo_java_tests.jar" 2>&1)
rc=$?
echo "$out"
if echo "$out" | grep -q "^WARNING in native method\|^FATAL ERROR in native method"; then
    echo "jvm.sh: -Xcheck:jni warned" >&2
    exit 1
fi
exit $rc

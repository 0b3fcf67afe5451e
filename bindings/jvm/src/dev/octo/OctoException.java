package dev.octo;

/** A failure of octo: its status (octo_status in octo.h) and its message. */
public final class OctoException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;

    public OctoException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** From the JNI side: the message as UTF-8 bytes (never JNI's modified UTF-8). */
    OctoException(int status, byte[] message) {
        this(status, new String(message, java.nio.charset.StandardCharsets.UTF_8));
    }

    /** octo's status (octo_status in octo.h: 1 invalid argument, 2 out of memory, 3 I/O, 4 not found, ...). */
    public int status() {
        return status;
    }
}

/*
 * tempfiles — the temporary files and folders octo names beside its outputs
 * (a deploy's half-made device folder, an atomic write's file in the moment
 * before its rename, the fallback where O_TMPFILE is missing), so that an
 * interrupted command leaves none of them behind.
 *
 * Each is registered while it exists (tempfiles_add, tempfiles_forget). A
 * command line that is interrupted (SIGINT, SIGTERM) calls
 * tempfiles_remove_all from its signal handler: it is async-signal-safe (a
 * fixed table of atomic slots; removal by unlinkat, openat and
 * platform/file.h's plat_dir_each, which is getdents64 on Linux; the POSIX
 * fallback's readdir is not), then the command dies of the signal as it
 * would have.
 *
 * Removal never follows a symbolic link: a link in a tree is unlinked, not
 * entered, so a folder swapped for a link cannot make octo delete what the
 * link points at (tempfiles_remove_tree serves deploy's replace step too).
 */
#ifndef OCTO_CORE_TEMPFILES_H
#define OCTO_CORE_TEMPFILES_H

#define TEMPFILES_MAX 32 /* registered at once; past it a name goes unregistered (only a kill leaves it) */

/* Register path; a slot for tempfiles_forget, -1 when the table is full or
 * the path too long (the file is then only removed by octo's own error paths). */
int tempfiles_add(const char *path);
/* The file was renamed into place or removed: no longer octo's to remove. */
void tempfiles_forget(int slot);

/* Remove every registered file or folder (async-signal-safe). */
void tempfiles_remove_all(void);

/* Remove path: a file, or a folder and everything under it, without
 * following links. 0, or the errno of the first thing that could not be
 * removed (the rest is still removed). Async-signal-safe. */
int tempfiles_remove_tree(const char *path);

#endif

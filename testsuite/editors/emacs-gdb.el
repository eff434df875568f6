;;; emacs-gdb.el --- Emacs's own gdb-mi driving tmdb, as a user does -*- lexical-binding: t -*-
;;
;; Run by run-editors.sh:
;;   emacs -Q --batch -l emacs-gdb.el -f tm-emacs-main
;; with TMDB (the binary), TM_ARGS (what follows "tmdb -i=mi" on M-x gdb's
;; command line: a recording, or --args python3 PROGRAM), TM_SOURCE (the
;; model's source file), TM_LINE (a line inside a forward() there) and
;; TM_NAN_FUNC (the module the first NaN stop is in).
;;
;; The session is what a user does in Emacs: M-x gdb, C-x C-a C-b on a line
;; of the model's source (gud-break: "break FILE:LINE"), -exec-run (gud-run),
;; the stop's arrow in the source, C-x C-a C-d (gud-remove: "clear
;; FILE:LINE"), a breakpoint typed into the GUD buffer, continue to the
;; first NaN, step, the locals buffer, finish ("Value returned"), quit.
;; Every check prints "ok   WHAT" or "FAIL WHAT"; the exit status is the
;; number of failures (0: all passed).

(require 'gdb-mi)

(defvar tm-failures 0)

(defun tm-check (ok what)
  (princ (format "%s %s\n" (if ok "ok  " "FAIL") what))
  (unless ok (setq tm-failures (1+ tm-failures)))
  ok)

(defun tm-wait (pred what &optional secs)
  "Wait up to SECS (default 60) for PRED, reading gdb's output meanwhile."
  (let ((deadline (+ (float-time) (or secs 60))))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or (tm-check (funcall pred) what)
        (progn
          (princ "--- the GUD buffer:\n")
          (when (buffer-live-p gud-comint-buffer)
            (with-current-buffer gud-comint-buffer
              (princ (buffer-substring-no-properties
                      (max (point-min) (- (point-max) 3000)) (point-max)))))
          (princ "\n---\n")
          (when (getenv "TM_DEBUG")
            (dolist (e (reverse gdb-debug-log))
              (princ (format "%S\n" e))))
          nil))))

(defun tm-idle ()
  "Wait until gdb-mi has no command waiting for its answer."
  (tm-wait (lambda () (null gdb-handler-list)) "every command answered" 60))

(defun tm-type (cmd)
  "Type CMD into the GUD buffer and press RET."
  (with-current-buffer gud-comint-buffer
    (goto-char (point-max))
    (insert cmd)
    (comint-send-input)))

(defun tm-gud-text ()
  (with-current-buffer gud-comint-buffer
    (buffer-substring-no-properties (point-min) (point-max))))

(defun tm-bkpt-lines ()
  "The breakpoints gdb-mi knows: (NUMBER FUNC FILE LINE) each."
  (mapcar (lambda (b)
            (list (gdb-mi--field b 'number) (gdb-mi--field b 'func)
                  (gdb-mi--field b 'file) (gdb-mi--field b 'line)))
          (mapcar #'cdr gdb-breakpoints-list)))

(defun tm-emacs-main ()
  (let* ((tmdb (getenv "TMDB"))
         (args (getenv "TM_ARGS"))
         (source (getenv "TM_SOURCE"))
         (line (string-to-number (getenv "TM_LINE")))
         (nan-func (getenv "TM_NAN_FUNC"))
         (live (not (member (getenv "TM_LIVE") (quote (nil "")))))
         (file (file-name-nondirectory source))
         (gdb-many-windows nil)
         (gdb-show-main nil)
         src-buf stop-line)
    (setq gdb-enable-debug (and (getenv "TM_DEBUG") t))
    (setq src-buf (find-file-noselect source))
    ;; M-x gdb RET tmdb -i=mi ARGS RET
    (gdb (format "%s -i=mi -nx %s" tmdb args))
    (tm-wait (lambda () (equal gdb-prompt-name "(tmdb) "))
             "-gdb-show prompt gave the prompt")
    (tm-idle)
    ;; a recording knows its sources; a program, once it has run
    (unless live
      (tm-check (member (file-truename source)
                        (mapcar #'file-truename gdb-source-file-list))
                (format "-file-list-exec-source-files lists %s" file)))
    ;; C-x C-a C-b on LINE of the model's source
    (with-current-buffer src-buf
      (goto-char (point-min))
      (forward-line (1- line))
      (gud-break 1))
    (tm-wait (lambda () (tm-bkpt-lines)) "C-x C-a C-b made breakpoint 1")
    (when live
      (tm-check (equal (nth 1 (car (tm-bkpt-lines))) nil)
                (format "before run it is pending: %S" (car (tm-bkpt-lines)))))
    ;; gud-run: -exec-run
    (setq gdb-selected-line nil)
    (with-current-buffer gud-comint-buffer (gud-run nil))
    (tm-wait (lambda () (and (equal gdb-inferior-status "breakpoint-hit")
                             gdb-selected-line))
             "run stopped at breakpoint 1" (if live 120 60))
    (tm-idle)
    ;; the breakpoint's line: the def of the forward() holding LINE
    (let ((b (car (tm-bkpt-lines))))
      (tm-check (and b (nth 2 b) (equal (file-name-nondirectory (nth 2 b)) file) (nth 3 b))
                (format "breakpoint 1 has a source line in %s: %S" file b))
      (setq stop-line (and b (nth 3 b) (string-to-number (nth 3 b)))))
    ;; gdb-frame-handler's: where the arrow is
    (tm-check (and gdb-selected-file
                   (equal (file-truename gdb-selected-file) (file-truename source))
                   (eql gdb-selected-line stop-line))
              (format "the arrow is in %s at line %s: %S:%S" file stop-line
                      gdb-selected-file gdb-selected-line))
    ;; C-x C-a C-d at the same line: clear FILE:LINE
    (with-current-buffer src-buf
      (goto-char (point-min))
      (forward-line (1- line))
      (gud-remove 1))
    (tm-wait (lambda () (null (tm-bkpt-lines))) "C-x C-a C-d deleted it")
    (tm-idle)
    ;; a conditional breakpoint typed into the GUD buffer, then continue
    (tm-type "break model.** if tensor.nan_count > 0")
    (tm-wait (lambda () (tm-bkpt-lines)) "the typed breakpoint is listed")
    (tm-idle)
    (setq gdb-selected-line nil)
    (with-current-buffer gud-comint-buffer (gud-cont nil))
    (tm-wait (lambda () (and (equal gdb-inferior-status "breakpoint-hit")
                             gdb-selected-line))
             "continue stopped at the first NaN" (if live 120 60))
    (tm-idle)
    (tm-check (equal gdb-selected-frame nan-func)
              (format "the first NaN is in %s: %S" nan-func gdb-selected-frame))
    (tm-check (string-match-p (concat "Breakpoint 2, " (regexp-quote nan-func))
                              (tm-gud-text))
              "the GUD buffer shows the stop")
    ;; the locals buffer (-stack-list-locals)
    (let ((locals (gdb-get-buffer-create 'gdb-locals-buffer)))
      (gdb-update)
      (tm-wait (lambda () (with-current-buffer locals
                            (string-match-p "nan_count +[1-9]" (buffer-string))))
               "the locals buffer shows nan_count > 0")
      (with-current-buffer locals
        (princ (format "     locals: %s\n"
                       (replace-regexp-in-string "\n" " | " (buffer-string))))))
    ;; no more stops at every NaN: delete, typed
    (tm-type "delete")
    (tm-wait (lambda () (null (tm-bkpt-lines))) "delete deleted breakpoint 2")
    (tm-idle)
    ;; C-x C-a C-s: step
    (setq gdb-selected-line nil)
    (with-current-buffer gud-comint-buffer (gud-step 1))
    (tm-wait (lambda () (and (equal gdb-inferior-status "end-stepping-range")
                             gdb-selected-line))
             "step stopped (end-stepping-range)")
    (tm-idle)
    ;; C-x C-a C-f: finish prints the value returned, once
    (with-current-buffer gud-comint-buffer (gud-finish 1))
    (tm-wait (lambda () (equal gdb-inferior-status "function-finished"))
             "finish stopped (function-finished)")
    (tm-idle)
    (let ((text (tm-gud-text)) (n 0) (start 0))
      (while (string-match "Value returned is " text start)
        (setq n (1+ n) start (match-end 0)))
      (tm-check (= n 1) (format "\"Value returned\" shown once (%d)" n))
      ;; before the stop's prompt, on a line of its own
      (tm-check (string-match-p "^Value returned is \\$[0-9]+ = .*\n(tmdb) \\'" text)
                (format "\"Value returned\" comes before the prompt: %S"
                        (substring text (max 0 (- (length text) 200))))))
    (tm-type "quit")
    (tm-wait (lambda () (not (process-live-p (get-buffer-process gud-comint-buffer))))
             "quit ended tmdb" 30)
    (kill-emacs tm-failures)))

;;; emacs-gdb.el ends here

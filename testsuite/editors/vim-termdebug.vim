" vim-termdebug.vim -- Vim's own termdebug driving tmdb, as a user does.
"
" Run by run-editors.sh inside a terminal (termdebug opens terminal
" windows):  vim -Nu NONE -i NONE -S vim-termdebug.vim
" with TMDB (the binary), TM_MODE ("prompt": g:termdebug_config's
" use_prompt, MI on tmdb's stdin; "terminal": termdebug's default, tmdb's
" command line in a terminal window and MI on a second one through
" "new-ui mi PTY"), TM_ARGS (the arguments after :Termdebug: a recording,
" or --args python3 PROGRAM), TM_SOURCE (the model's source), TM_LINE (a
" line in a forward() there), TM_NAN_FILE (the file of the first NaN stop)
" and TM_OUT (where the results go).
"
" The session: :Termdebug, :Break on TM_LINE, :Run, the stop's sign,
" :Clear, a conditional breakpoint through TermDebugSendCommand (typed at
" tmdb's command line in the default mode), :Continue to the first NaN,
" :Evaluate, :Step, quit.  Each check writes "ok   WHAT" or "FAIL WHAT"
" to TM_OUT; the last line is "done".

let s:out = []
let s:live = $TM_ARGS =~ '--args'

func s:Check(ok, what)
  call add(s:out, (a:ok ? 'ok   ' : 'FAIL ') . a:what)
  call writefile(s:out, $TM_OUT)
  return a:ok
endfunc

" Waits (reading tmdb meanwhile) until expr is true.
func s:Wait(expr, what, secs)
  let n = 0
  while !eval(a:expr) && n < a:secs * 20
    sleep 50m
    let n += 1
  endwhile
  return s:Check(eval(a:expr), a:what)
endfunc

" The debugPC sign: [file, line] or [].
func s:Signs()
  let out = []
  for b in getbufinfo()
    call extend(out, sign_getplaced(b.bufnr, {'group': 'TermDebug'}))
  endfor
  return out
endfunc

func s:PC()
  for b in s:Signs()
    for s in b.signs
      if s.group == 'TermDebug' && s.name == 'debugPC'
        return [bufname(b.bufnr), s.lnum]
      endif
    endfor
  endfor
  return []
endfunc

func s:BreakSigns()
  let out = []
  for b in s:Signs()
    for s in b.signs
      if s.group == 'TermDebug' && s.name =~ '^debugBreakpoint'
        call add(out, [fnamemodify(bufname(b.bufnr), ':t'), s.lnum])
      endif
    endfor
  endfor
  return out
endfunc

func s:Messages()
  return execute('messages')
endfunc

func s:Main()
  packadd termdebug
  let g:termdebug_config = {'command': [$TMDB, '-nx'],
        \ 'use_prompt': $TM_MODE == 'prompt', 'map_K': 0}
  execute 'edit ' . fnameescape($TM_SOURCE)
  let src = bufnr()
  let file = fnamemodify($TM_SOURCE, ':t')
  execute 'Termdebug ' . $TM_ARGS
  call s:Check(exists(':Break') == 2, ':Termdebug started (' . $TM_MODE . ' mode)')
  sleep 500m

  " :Break on TM_LINE in the source window
  call win_gotoid(bufwinid(src))
  execute $TM_LINE
  Break
  if s:live
    call s:Wait('s:Messages() =~ "Breakpoint 1 (.*:' . $TM_LINE . ') pending"',
          \ ':Break before run: pending', 10)
  else
    call s:Wait('!empty(s:BreakSigns())', ':Break placed breakpoint 1''s sign', 10)
  endif

  Run
  call s:Wait('!empty(s:PC())', ':Run stopped: the debugPC sign', s:live ? 120 : 20)
  let pc = s:PC()
  let bs = s:BreakSigns()
  call s:Check(!empty(bs) && bs[0][0] == file, 'breakpoint 1''s sign in ' . file . ': ' . string(bs))
  call s:Check(!empty(pc) && !empty(bs) && fnamemodify(pc[0], ':t') == file && pc[1] == bs[0][1],
        \ 'the stop is at breakpoint 1''s line: ' . string(pc))

  " :Clear on that line
  if !empty(bs)
    call win_gotoid(bufwinid(src))
    execute bs[0][1]
    Clear
    call s:Wait('empty(s:BreakSigns())', ':Clear removed the sign', 10)
  endif

  " the first NaN
  call TermDebugSendCommand('break model.** if tensor.nan_count > 0')
  sleep 300m
  let old = s:PC()
  Continue
  call s:Wait('s:PC() != ' . string(old) . ' && !empty(s:PC())',
        \ ':Continue stopped again', s:live ? 120 : 20)
  let pc = s:PC()
  call s:Check(!empty(pc) && fnamemodify(pc[0], ':t') == $TM_NAN_FILE,
        \ 'the first NaN stop is in ' . $TM_NAN_FILE . ': ' . string(pc))

  Evaluate tensor.nan_count
  call s:Wait('s:Messages() =~ "\"tensor.nan_count\": [1-9]"',
        \ ':Evaluate tensor.nan_count is not 0', 10)

  let old = s:PC()
  Step
  call s:Wait('s:PC() != ' . string(old) . ' && !empty(s:PC())', ':Step moved the sign', 20)

  if $TM_MODE == 'prompt'
    call TermDebugSendCommand('-gdb-exit')
  else
    " a live program makes quit ask (y or n) at a terminal, as GDB's does
    call TermDebugSendCommand('set confirm off')
    call TermDebugSendCommand('quit')
  endif
  call s:Wait('exists(":Break") != 2', 'tmdb ended and termdebug with it', 20)
  call add(s:out, 'done')
  call writefile(s:out, $TM_OUT)
  qall!
endfunc

try
  call s:Main()
catch
  call s:Check(0, 'exception: ' . v:exception . ' at ' . v:throwpoint)
  call add(s:out, 'done')
  call writefile(s:out, $TM_OUT)
  qall!
endtry

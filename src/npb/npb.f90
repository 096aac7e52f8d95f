! npb: the NAS Parallel Benchmarks kernels EP, CG, MG, FT (Fortran) and IS (C), written from
! the specification (NAS RNR-94-007, NAS-95-020; the NPB 3 problem classes S, W, A, B).
!
!   mpirun -np 2 npb --class=S --kernels=ep,cg,mg,ft,is [--summary=npb.summary]
!
! Each kernel prints its report and verification; npb.summary gets key=value lines (the
! values verified, seconds and Mop/s of each timed section). Exit status 0 even when a
! verification fails: the summary and the "VERIFICATION FAILED" lines say which value.
program npb
  use, intrinsic :: iso_c_binding, only: c_double, c_int
  use npb_common
  use npb_ep, only: ep_run
  use npb_cg, only: cg_run
  use npb_mg, only: mg_run
  use npb_ft, only: ft_run
  implicit none

  interface
    subroutine npb_is(cls, seconds, mops, partial, partial_expected, full_ok, unordered, &
                      verified) bind(C, name='npb_is')
      import :: c_double, c_int
      integer(c_int), value :: cls
      real(c_double), intent(out) :: seconds, mops, unordered
      integer(c_int), intent(out) :: partial, partial_expected, full_ok, verified
    end subroutine npb_is
  end interface

  character(len=256) :: arg, kernels, summary
  character :: cls
  integer :: i, n, start, done

  cls = 'S'
  kernels = 'ep,cg,mg,ft,is'
  summary = 'npb.summary'
  do i = 1, command_argument_count()
    call get_command_argument(i, arg)
    if (arg(1:8) == '--class=') then
      cls = arg(9:9)
    else if (arg(1:10) == '--kernels=') then
      kernels = arg(11:)
    else if (arg(1:10) == '--summary=') then
      summary = arg(11:)
    else
      write (*, '(a)') 'npb: error: unknown argument '//trim(arg)// &
        ' (--class=S|W|A|B, --kernels=ep,cg,mg,ft,is, --summary=FILE)'
      stop 2
    end if
  end do
  call npb_init(trim(summary))
  call put_text('class', cls)
  call put_int('ranks', nprocs)
  call say(' NAS Parallel Benchmarks kernels (from the NPB specification), class '//cls)

  done = 0
  start = 1
  n = len_trim(kernels)
  do i = 1, n + 1
    if (i <= n) then
      if (kernels(i:i) /= ',') cycle
    end if
    select case (kernels(start:i - 1))
    case ('ep')
      call ep_run(cls)
    case ('cg')
      call cg_run(cls)
    case ('mg')
      call mg_run(cls)
    case ('ft')
      call ft_run(cls)
    case ('is')
      call run_is()
    case default
      call npb_abort('unknown kernel '//kernels(start:i - 1)//' (ep, cg, mg, ft, is)')
    end select
    done = done + 1
    start = i + 1
  end do
  call put_int('kernels', done)
  call put_int('verified', merge(1, 0, all_verified))
  call say(merge(' All kernels verified.      ', ' VERIFICATION FAILED (above)', all_verified))
  call npb_finish()

contains

  subroutine run_is()
    real(c_double) :: seconds, mops, unordered
    integer(c_int) :: partial, partial_expected, full_ok, verified
    call npb_is(ichar(cls), seconds, mops, partial, partial_expected, full_ok, unordered, verified)
    if (verified == 0) all_verified = .false.
    call report_head('IS', cls)
    if (me == 0) then
      write (*, '(" Partial verification tests passed = ",i0," of ",i0)') partial, partial_expected
      write (*, '(" Full verification (keys in order) = ",a)') merge('yes', 'no ', full_ok /= 0)
    end if
    call put_int('is_partial_passed', int(partial))
    call put_int('is_unordered_keys', nint(unordered))
    call report_tail('is', real(seconds, dp), real(mops, dp), verified /= 0)
  end subroutine run_is

end program npb
